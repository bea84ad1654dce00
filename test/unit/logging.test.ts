import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { InvalidInputError } from '../../src/api/errors.ts';
import { openLogger, parseLogOptions, prettyLine, rotateLogFile } from '../../src/cli/logging.ts';

const ROOT = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'fastplane-logging-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

describe('the log file', () => {
  test('rotates once it reached the size, keeping the newest 3 rotated files', () => {
    const path = join(dir, 'rotate.log');
    for (let i = 1; i <= 5; i++) {
      writeFileSync(path, `generation ${String(i)}\n`.padEnd(100, '.'));
      rotateLogFile(path, 100, 3);
    }
    assert.equal(existsSync(path), false, 'the full file moved aside');
    assert.match(readFileSync(`${path}.1`, 'utf8'), /^generation 5/);
    assert.match(readFileSync(`${path}.2`, 'utf8'), /^generation 4/);
    assert.match(readFileSync(`${path}.3`, 'utf8'), /^generation 3/);
    assert.equal(existsSync(`${path}.4`), false, 'older files are dropped');
  });

  test('stays in place below the size', () => {
    const path = join(dir, 'small.log');
    writeFileSync(path, 'short\n');
    rotateLogFile(path, 100, 3);
    assert.equal(readFileSync(path, 'utf8'), 'short\n');
    assert.equal(existsSync(`${path}.1`), false);
  });

  test('gets JSON lines at the chosen level and below it nothing', () => {
    const path = join(dir, 'levels.log');
    const log = openLogger(path, parseLogOptions('info', undefined));
    log.debug({ cluster: 'a' }, 'hidden');
    log.warn({ cluster: 'a', endpoints: ['https://127.0.0.1:2379'] }, 'shown');
    log.flush();
    const lines = readFileSync(path, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { level: number; msg: string; endpoints: string[] });
    assert.deepEqual(lines.map((l) => [l.level, l.msg]), [[40, 'shown']]);
    assert.deepEqual(lines[0]?.endpoints, ['https://127.0.0.1:2379']);
  });
});

describe('log options', () => {
  test('refuse an unknown level or format as input errors naming the flag', () => {
    assert.throws(() => parseLogOptions('loud', undefined), (e: unknown) => e instanceof InvalidInputError && /--log-level/.test(e.problems.join()));
    assert.throws(() => parseLogOptions('info', 'xml'), (e: unknown) => e instanceof InvalidInputError && /--log-format/.test(e.problems.join()));
    assert.deepEqual(parseLogOptions('debug', 'pretty'), { level: 'debug', format: 'pretty' });
  });

  test('pretty prints one compact line: time, level, message, then the fields', () => {
    const time = Date.UTC(2026, 11, 3, 17, 5, 9, 42);
    const line = prettyLine(JSON.stringify({ level: 40, time, pid: 1, hostname: 'h', msg: 'observe failed', cluster: 'demo', endpoints: ['https://a:2379'] }));
    assert.equal(line, '17:05:09.042 WARN  observe failed cluster=demo endpoints=["https://a:2379"]\n');
  });
});

describe('CLI start', () => {
  /** Packages the CLI imports for these arguments, seen by a resolve hook. */
  function packagesLoaded(args: string[]): string[] {
    const hook = `data:text/javascript,${encodeURIComponent(
      "export async function resolve(s, c, next) { if (!s.startsWith('.') && !s.startsWith('node:') && !s.startsWith('file:')) process.stderr.write('PKG ' + s + '\\n'); return next(s, c); }",
    )}`;
    const register = `data:text/javascript,${encodeURIComponent(`import { register } from 'node:module'; register(${JSON.stringify(hook)});`)}`;
    const run = spawnSync(process.execPath, ['--import', register, '--import', 'tsx', join(ROOT, 'src/cli/main.ts'), ...args], {
      cwd: ROOT,
      env: { ...process.env, FASTPLANE_HOME: join(dir, 'state') },
      encoding: 'utf8',
    });
    assert.equal(run.status, 0, run.stderr);
    return [...new Set(run.stderr.split('\n').filter((l) => l.startsWith('PKG ')).map((l) => l.slice(4)))];
  }

  test('--help loads neither etcd3 nor any command module', () => {
    const loaded = packagesLoaded(['--help']);
    assert.ok(loaded.includes('commander'), loaded.join(', '));
    for (const heavy of ['etcd3', 'better-sqlite3', 'listr2', '@peculiar/x509', 'pino']) assert.ok(!loaded.includes(heavy), `--help loaded ${heavy}`);
  });

  test('status without control planes loads neither etcd3 nor ssh2 nor zod', () => {
    const loaded = packagesLoaded(['status']);
    assert.ok(loaded.includes('better-sqlite3'), loaded.join(', '));
    for (const heavy of ['etcd3', 'ssh2', 'zod']) assert.ok(!loaded.includes(heavy), `status loaded ${heavy}: ${loaded.join(', ')}`);
  });
});

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { ensureBuiltCli } from '../support/built-cli.ts';
import { pidsUnder } from '../support/cli.ts';

// What a user gets from `npm pack`: the compiled CLI, installed into an empty prefix with production
// dependencies only, runs without tsx or TypeScript. The pack takes the dist/ the runner built (its
// prepare script would compile it again), and better-sqlite3's install finds its native binary as a
// local prebuild made from this checkout's own build (prebuild-install's `local_prebuilds`), as a user
// with a binary mirror would: compiling SQLite again tests the C compiler, not the package.

const ROOT = join(import.meta.dirname, '..', '..');
const work = mkdtempSync(join(tmpdir(), 'fastplane-pack-'));
const prefix = join(work, 'prefix');
const stateDir = join(work, 'state');
after(() => {
  rmSync(work, { recursive: true, force: true });
});

/** A folder holding this checkout's better-sqlite3 binary under the name prebuild-install looks for. */
async function localPrebuilds(): Promise<string> {
  const dir = join(work, 'prebuilds');
  mkdirSync(dir);
  const module = join(ROOT, 'node_modules', 'better-sqlite3');
  const { version } = JSON.parse(readFileSync(join(module, 'package.json'), 'utf8')) as { version: string };
  const name = `better-sqlite3-v${version}-node-v${process.versions.modules}-${process.platform}-${process.arch}.tar.gz`;
  const tar = await run('tar', ['-czf', join(dir, name), '-C', module, 'build/Release/better_sqlite3.node']);
  assert.equal(tar.code, 0, tar.stderr);
  return dir;
}

function run(file: string, args: string[], env: Record<string, string> = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { cwd: ROOT, env: { ...process.env, ...env }, timeout: 540_000, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, stdout, stderr });
    });
  });
}

describe('npm pack, installed into an empty prefix', { timeout: 600_000 }, () => {
  test('runs fastplane --version and fastplane up with production dependencies only', async () => {
    await ensureBuiltCli();
    const pack = await run('npm', ['pack', '--ignore-scripts', '--pack-destination', work]);
    assert.equal(pack.code, 0, pack.stderr);
    const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
    assert.ok(tarball !== undefined, 'npm pack wrote a tarball');

    // Global install: production dependencies only. npm 11 runs no install script unless allowed;
    // better-sqlite3 needs its native build, protobufjs its postinstall.
    const prebuilds = await localPrebuilds();
    const install = await run('npm', ['install', '--global', '--prefix', prefix, '--allow-scripts=better-sqlite3,protobufjs', '--no-audit', '--no-fund', join(work, tarball)], { npm_config_better_sqlite3_local_prebuilds: prebuilds });
    assert.equal(install.code, 0, install.stderr);
    const installed = join(prefix, 'lib', 'node_modules', 'fastplane');
    assert.ok(existsSync(join(installed, 'dist', 'cli', 'main.js')), 'the package carries the compiled CLI');
    assert.ok(!existsSync(join(installed, 'src')), 'and not the TypeScript sources');
    for (const dev of ['tsx', 'typescript', 'eslint']) assert.ok(!existsSync(join(installed, 'node_modules', dev)), `${dev} is not installed`);

    const bin = join(prefix, 'bin', 'fastplane');
    const version = await run(bin, ['--version']);
    assert.equal(version.code, 0, version.stderr);
    assert.equal(version.stdout.trim(), '0.1.0');

    const env = { FASTPLANE_HOME: stateDir, FASTPLANE_TEST_HOOKS: '1', FASTPLANE_ADDRESS_PREFIX: '127.223' };
    try {
      const up = await run(bin, ['up', '--name', 'packed', '--replicas', '1', '--provisioning-delay', '0s', '--timeout', '90s', '-o', 'json'], env);
      assert.equal(up.code, 0, up.stderr);
      assert.equal((JSON.parse(up.stdout) as { status: { voters: number } }).status.voters, 1);
    } finally {
      const down = await run(bin, ['down', 'packed'], env);
      assert.equal(down.code, 0, down.stderr);
    }
    assert.deepEqual(pidsUnder(stateDir), [], 'down stopped the member');
  });
});

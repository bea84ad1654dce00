import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

const ROOT = join(import.meta.dirname, '..', '..');
const dir = mkdtempSync(join(tmpdir(), 'fastplane-versions-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

const binary = join(dir, 'etcd');
const asked = join(dir, 'asked');
const versionsFile = join(dir, 'versions.json');

/** A stand-in binary that says its version and counts how often it was asked. */
function install(version: string): void {
  writeFileSync(binary, `#!/bin/sh\necho x >> ${asked}\necho "etcd Version: ${version}"\n`);
  chmodSync(binary, 0o755);
}

/** The version as a new fastplane process finds it. */
function versionInNewProcess(): string {
  const code = `import { binaryVersion } from ${JSON.stringify(join(ROOT, 'src/adapters/etcd/etcd-binaries.ts'))}; console.log(binaryVersion(${JSON.stringify(binary)}) ?? 'none');`;
  return execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], { cwd: ROOT, encoding: 'utf8', env: { ...process.env, FASTPLANE_VERSIONS_FILE: versionsFile } }).trim();
}

const timesAsked = (): number => readFileSync(asked, 'utf8').split('\n').filter((line) => line !== '').length;

test('a binary is asked its version once across processes, and again once it is replaced', () => {
  install('3.6.17');
  assert.equal(versionInNewProcess(), '3.6.17');
  assert.equal(versionInNewProcess(), '3.6.17');
  assert.equal(timesAsked(), 1, 'the second process read the kept answer');
  install('3.6.18-replaced');
  assert.equal(versionInNewProcess(), '3.6.18-replaced');
  assert.equal(timesAsked(), 2, 'a binary replaced in place is asked again');
});

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { InvalidInputError } from '../../src/api/errors.ts';
import { findEtcdBinary, listEtcdVersions } from '../../src/adapters/etcd/etcd-binaries.ts';

// Needs the binaries from `bash scripts/install-etcd.sh`: 3.4.23 in /usr/bin, 3.5.x in the cache.

test('finds Debian 3.4.23 and the cached 3.5.x by the version they report', () => {
  const versions = listEtcdVersions();
  assert.ok(versions.includes('3.4.23'), versions.join(','));
  const v35 = versions.find((version) => version.startsWith('3.5.'));
  assert.ok(v35 !== undefined, `no 3.5.x among ${versions.join(',')}`);
  assert.equal(findEtcdBinary('3.4.23'), '/usr/bin/etcd');
  assert.ok(findEtcdBinary(v35).endsWith(join(v35, 'usr', 'bin', 'etcd')));
});

test('the install script also gives etcd 3.5.30 or later (Debian testing), whose add rule differs', () => {
  const recent = listEtcdVersions().filter((version) => /^3\.5\.(\d+)$/.test(version) && Number(version.split('.')[2]) >= 30);
  assert.ok(recent.length > 0, `no etcd 3.5.30+ among ${listEtcdVersions().join(',')}`);
  assert.ok(findEtcdBinary(recent[0]!).endsWith(join(recent[0]!, 'usr', 'bin', 'etcd')));
});

test('a missing version is an InvalidInputError naming it, the versions found and the install script', () => {
  assert.throws(
    () => findEtcdBinary('9.9.9'),
    (error: unknown) => {
      assert.ok(error instanceof InvalidInputError);
      assert.match(error.message, /etcd 9\.9\.9 is not installed/);
      assert.match(error.message, /found: .*3\.4\.23/);
      assert.match(error.message, /bash scripts\/install-etcd\.sh/);
      return true;
    },
  );
});

test('FASTPLANE_ETCD_PATH directories are searched too', () => {
  const v35 = listEtcdVersions().find((version) => version.startsWith('3.5.'));
  assert.ok(v35 !== undefined);
  const dir = mkdtempSync(join(tmpdir(), 'fastplane-etcd-path-'));
  const emptyCache = mkdtempSync(join(tmpdir(), 'fastplane-etcd-cache-'));
  const saved = { path: process.env.FASTPLANE_ETCD_PATH, cache: process.env.FASTPLANE_ETCD_CACHE };
  try {
    symlinkSync(findEtcdBinary(v35), join(dir, 'etcd'));
    process.env.FASTPLANE_ETCD_CACHE = emptyCache;
    process.env.FASTPLANE_ETCD_PATH = `/nonexistent:${dir}`;
    assert.equal(findEtcdBinary(v35), join(dir, 'etcd'));
  } finally {
    for (const [key, value] of [['FASTPLANE_ETCD_PATH', saved.path], ['FASTPLANE_ETCD_CACHE', saved.cache]] as const) {
      if (value === undefined) Reflect.deleteProperty(process.env, key);
      else process.env[key] = value;
    }
    rmSync(dir, { recursive: true, force: true });
    rmSync(emptyCache, { recursive: true, force: true });
  }
});

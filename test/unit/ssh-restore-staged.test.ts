import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, beforeEach, describe, test } from 'node:test';
import { InvalidInputError } from '../../src/api/errors.ts';
import { restoreOnHost, type HostShell } from '../../src/adapters/providers/ssh/remote-files.ts';
import { remoteMember, stagedSnapshotPath } from '../../src/adapters/providers/ssh/remote-scripts.ts';
import { localHostShell } from '../support/local-host-shell.ts';

// The ssh restore's own scripts, run by a local shell in a scratch directory that stands for the
// host: a snapshot staged on the host is restored where it lies (no upload, kept afterwards); one
// whose content does not match its name is left alone and the snapshot is copied over instead. The
// snapshot tool is a stand-in that records which file it restored.

const root = mkdtempSync(join(tmpdir(), 'fastplane-staged-'));
after(() => {
  rmSync(root, { recursive: true, force: true });
});

const local = join(root, 'local');
mkdirSync(local);
const etcd = join(local, 'etcd');
writeFileSync(etcd, '#!/bin/sh\nexit 0\n');
// `etcdutl snapshot restore FILE --data-dir DIR ...`: DIR gets a note of FILE.
writeFileSync(join(local, 'etcdutl'), '#!/bin/sh\nmkdir -p "$5" && echo "$3" > "$5/restored-from"\n');
chmodSync(etcd, 0o755);
chmodSync(join(local, 'etcdutl'), 0o755);

const snapshot = join(local, 'backup.db');
writeFileSync(snapshot, 'an etcd snapshot, as far as this test goes');
const sha256 = createHash('sha256').update(readFileSync(snapshot)).digest('hex');

const target = { address: '198.18.0.1', port: 22, user: 'root' };

/** The host's shell, recording only the snapshots uploaded (the tool's copy is not one). */
function shell(): HostShell & { uploads: string[] } {
  const host = localHostShell();
  return {
    ...host,
    get uploads() {
      return host.uploads.filter((to) => to.endsWith('.db'));
    },
  };
}

describe('ssh restore of a snapshot staged on the host', () => {
  let baseDir = '';
  let n = 0;
  beforeEach(() => {
    n += 1;
    baseDir = join(root, `host-${String(n)}`);
    mkdirSync(baseDir);
  });

  async function restore(host: HostShell): Promise<string> {
    const member = remoteMember(baseDir, 'c', 'c-1');
    const launch = {
      memberName: 'c-1',
      version: '3.6.17',
      initialCluster: 'c-1=https://198.18.0.1:2380',
      initialClusterState: 'new' as const,
      clusterToken: 'c',
      maxLearners: 1,
      restoreFrom: { file: snapshot, sha256 },
    };
    await restoreOnHost(host, target, { member, peerURL: 'https://198.18.0.1:2380', localBinary: etcd, remoteBinDir: `${baseDir}/bin`, baseDir }, launch);
    return readFileSync(join(member.dataDir, 'restored-from'), 'utf8').trim();
  }

  test('a staged snapshot is restored in place, never uploaded, and stays on the host', async () => {
    const staged = stagedSnapshotPath(baseDir, sha256);
    mkdirSync(join(baseDir, 'snapshots'));
    copyFileSync(snapshot, staged);
    const host = shell();
    assert.equal(await restore(host), staged);
    assert.deepEqual(host.uploads, []);
    assert.ok(existsSync(staged), 'the owner staged it: it is kept');
  });

  test('without a staged snapshot, the file is copied over, restored and the copy removed', async () => {
    const host = shell();
    const from = await restore(host);
    assert.equal(host.uploads.length, 1);
    assert.equal(from, host.uploads[0]);
    assert.deepEqual(readdirSync(join(baseDir, 'clusters', 'c', 'c-1')).filter((f) => f.endsWith('.db')), [], 'no copy left behind');
  });

  test('a staged file whose content is not its name is left alone, and the snapshot is copied instead', async () => {
    const staged = stagedSnapshotPath(baseDir, sha256);
    mkdirSync(join(baseDir, 'snapshots'));
    writeFileSync(staged, 'something else');
    const host = shell();
    const from = await restore(host);
    assert.equal(host.uploads.length, 1);
    assert.equal(from, host.uploads[0]);
    assert.equal(readFileSync(staged, 'utf8'), 'something else');
  });

  test('a copy that changed on its way is refused as bad input, naming the file', async () => {
    const host = shell();
    const upload = host.upload;
    host.upload = async (hostTarget, from, to) => {
      if (to.endsWith('.db')) writeFileSync(to, 'changed in transit');
      else await upload(hostTarget, from, to);
    };
    await assert.rejects(restore(host), (error: unknown) => error instanceof InvalidInputError && error.problems.some((p) => p.includes(snapshot) && p.includes('changed since restore checked it')));
    assert.equal(existsSync(remoteMember(baseDir, 'c', 'c-1').dataDir), false, 'no data dir from a file that is not the snapshot');
  });
});

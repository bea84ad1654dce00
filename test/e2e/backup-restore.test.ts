import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { listBackups, type Backup } from '../../src/care/backup/backup-files.ts';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { cliEnvFactory, pidsUnder, statusOf } from '../support/cli.ts';
import { askEtcd, kvClientFor } from '../support/etcd-direct.ts';

const newEnv = cliEnvFactory();
const env = newEnv('127.180');
const KEYS = 10_000;
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function writeKeys(doc: ControlPlaneStatusDocument, prefix: string, count: number): Promise<Map<string, string>> {
  const client = kvClientFor(doc.status);
  const written = new Map<string, string>();
  try {
    for (let start = 0; start < count; start += 250) {
      const batch = Array.from({ length: Math.min(250, count - start) }, (_, i) => [`${prefix}${String(start + i).padStart(6, '0')}`, `value-${String(start + i)}-${String(Math.random())}`] as const);
      await Promise.all(batch.map(([key, value]) => client.put(key).value(value)));
      for (const [key, value] of batch) written.set(key, value);
    }
  } finally {
    client.close();
  }
  return written;
}

async function readAll(doc: ControlPlaneStatusDocument): Promise<Record<string, string>> {
  const client = kvClientFor(doc.status);
  try {
    return await client.getAll().prefix('/').strings();
  } finally {
    client.close();
  }
}

function sha256(file: string): string {
  return createHash('sha256').update(readFileSync(file)).digest('hex');
}

async function backupOk(name: string): Promise<Backup> {
  const run = await env.run(['backup', name, '-o', 'json']);
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout) as Backup;
}

/** What a refused restore must leave as it was: the records, the machine folders and the processes. */
function snapshotOfState(): string {
  const clusters = join(env.stateDir, 'clusters');
  return JSON.stringify({
    controlPlanes: env.controlPlanes(),
    machines: env.controlPlanes().map((name) => env.machines(name).map((m) => m.name)),
    folders: existsSync(clusters) ? readdirSync(clusters).sort() : [],
    processes: pidsUnder(env.stateDir).length,
  });
}

describe('backup and restore on real etcd', { timeout: 600_000 }, () => {
  let source: ControlPlaneStatusDocument;
  let backup: Backup;
  let atBackup: Map<string, string>;

  test(`backup of a 3-member cluster with ${String(KEYS)} keys is verified and described by its sidecar`, async () => {
    const up = await env.run(['up', '--name', 'src', '--replicas', '3', '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    source = statusOf(up.stdout);
    atBackup = await writeKeys(source, '/data/', KEYS);
    backup = await backupOk('src');
    assert.ok(backup.file.startsWith(join(env.stateDir, 'backups', 'src')), backup.file);
    assert.match(backup.file, /\/\d{8}T\d{6}\.\d{3}Z-rev\d+\.db$/);
    assert.ok(backup.file.endsWith(`-rev${String(backup.revision)}.db`));
    assert.equal(backup.sha256, sha256(backup.file));
    assert.equal(backup.size, readFileSync(backup.file).length);
    assert.ok(backup.revision >= KEYS, `revision ${String(backup.revision)} covers every write`);
    assert.equal(backup.liveKeys, KEYS, 'the keys held at the backup revision');
    const { members, statuses } = await askEtcd(source.status);
    assert.ok(members.some((m) => m.id === backup.memberId && m.name === backup.member), 'names a member of the cluster');
    assert.equal(backup.etcdVersion, statuses[0]?.version);
    assert.match(backup.clusterId, /^\d+$/);
    assert.ok(backup.raftIndex > 0);
    assert.deepEqual({ ...JSON.parse(readFileSync(`${backup.file}.json`, 'utf8')), file: backup.file }, backup, 'the printed document is the sidecar with its file');

    const list = await env.run(['backups', 'src', '-o', 'json']);
    assert.equal(list.code, 0, list.stderr);
    assert.deepEqual(JSON.parse(list.stdout), [backup]);
  });

  test('restore into a new cluster has exactly the keys and values of the snapshot, not later writes', async () => {
    await writeKeys(source, '/after/', 50);
    const run = await env.run(['restore', 'copy', '--from', backup.file, '--replicas', '3', '--timeout', '180s', '-o', 'json']);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, new RegExp(`restore verified: ${String(KEYS)} keys at revision ${String(backup.revision)}, as the backup recorded`));
    const restored = statusOf(run.stdout);
    const { members } = await askEtcd(restored.status);
    assert.equal(members.filter((m) => !m.isLearner).length, 3, 'three voters');
    assert.deepEqual(await readAll(restored), Object.fromEntries(atBackup));
    const inits = env.events('copy').filter((e) => e.action === 'InitCluster' && e.outcome === 'Succeeded');
    assert.equal(inits.length, 1, 'one init, the others joined');
    assert.equal(env.events('copy').filter((e) => e.action === 'AddLearner' && e.outcome === 'Succeeded').length, 2);
  });

  describe('bad input exits 2 with a precise message and changes nothing', () => {
    const cases: { name: string; args: () => string[]; says: RegExp }[] = [
      { name: 'missing file', args: () => ['restore', 'other', '--from', join(env.stateDir, 'nope.db')], says: /--from .*nope\.db: no such file/ },
      { name: 'no --from', args: () => ['restore', 'other'], says: /--from: give the snapshot file/ },
      {
        name: 'wrong hash',
        args: () => {
          const file = join(env.stateDir, 'damaged.db');
          writeFileSync(file, Buffer.concat([readFileSync(backup.file), Buffer.from('x')]));
          copyFileSync(`${backup.file}.json`, `${file}.json`);
          return ['restore', 'other', '--from', file];
        },
        says: /--from .*damaged\.db: sha256 [0-9a-f]{64} does not match [0-9a-f]{64} in its sidecar/,
      },
      {
        name: 'snapshot of a newer etcd version',
        args: () => {
          const file = join(env.stateDir, 'newer.db');
          copyFileSync(backup.file, file);
          writeFileSync(`${file}.json`, JSON.stringify({ ...backup, etcdVersion: '3.5.16' }));
          return ['restore', 'other', '--from', file, '--version', '3.4.23'];
        },
        says: /a snapshot of etcd 3\.5\.16 cannot be restored into etcd 3\.4\.23/,
      },
      { name: 'onto an existing cluster without --replace', args: () => ['restore', 'src', '--from', backup.file], says: /control plane src exists; .*--replace/ },
    ];
    for (const c of cases) {
      test(c.name, async () => {
        const before = snapshotOfState();
        const backups = readdirSync(join(env.stateDir, 'backups', 'src')).length;
        const run = await env.run(c.args());
        assert.equal(run.code, 2, run.stderr);
        assert.match(run.stderr, c.says);
        assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
        assert.equal(snapshotOfState(), before);
        assert.equal(readdirSync(join(env.stateDir, 'backups', 'src')).length, backups, 'no backup taken');
      });
    }
  });

  test('--replace backs the existing cluster up, then rebuilds it from the snapshot', async () => {
    const before = (await env.run(['backups', 'src', '-o', 'json'])).stdout;
    const run = await env.run(['restore', 'src', '--from', backup.file, '--replace', '--replicas', '1', '--timeout', '120s', '-o', 'json']);
    assert.equal(run.code, 0, run.stderr);
    const backups = JSON.parse((await env.run(['backups', 'src', '-o', 'json'])).stdout) as Backup[];
    assert.equal(backups.length, (JSON.parse(before) as Backup[]).length + 1, 'a backup of the replaced cluster');
    const replacedBackup = backups.find((b) => !before.includes(b.file));
    assert.ok(replacedBackup !== undefined && replacedBackup.revision > backup.revision, 'it holds the writes made after the first backup');
    assert.match(run.stderr, new RegExp(`restore verified: ${String(KEYS)} keys at revision ${String(backup.revision)}, as the backup recorded`));
    const doc = statusOf(run.stdout);
    assert.equal(doc.status.voters, 1);
    assert.deepEqual(await readAll(doc), Object.fromEntries(atBackup));
  });

  test('a restore whose keys read back differ from the count its backup recorded fails (exit 1) and says so', async () => {
    const file = join(env.stateDir, 'miscounted.db');
    copyFileSync(backup.file, file);
    writeFileSync(`${file}.json`, JSON.stringify({ ...backup, liveKeys: KEYS + 1 }));
    const run = await env.run(['restore', 'miscounted', '--from', file, '--replicas', '1', '--timeout', '120s']);
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, new RegExp(`error: restore of miscounted failed its check: the restored cluster holds ${String(KEYS)} keys at revision ${String(backup.revision)}, but the backup .*miscounted\\.db recorded ${String(KEYS + 1)}`));
    assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
  });

  test('a backup with no member answering fails with exit 3 and leaves no file', async () => {
    const down = await env.run(['restore', 'copy', '--from', backup.file, '--replace', '--replicas', '1', '--timeout', '120s']);
    assert.equal(down.code, 0, down.stderr);
    for (const pid of pidsUnder(join(env.stateDir, 'clusters', 'copy'))) process.kill(pid, 'SIGKILL');
    const dir = join(env.stateDir, 'backups', 'copy');
    const count = readdirSync(dir).length;
    const run = await env.run(['backup', 'copy']);
    assert.equal(run.code, 3, run.stderr);
    assert.match(run.stderr, /error: backup of copy failed: /);
    assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    assert.equal(readdirSync(dir).length, count, 'no partial file left');
  });

  test('scheduled backups: taken by reconcile passes every 2s, pruned to keep; a failing one is an event and BackupFailing, the cluster stays converged', async () => {
    const manifest = env.writeManifest('src', { replicas: 1, backup: { every: '2s', keep: 2 } });
    const up = async (): Promise<ControlPlaneStatusDocument> => {
      const run = await env.run(['up', '-f', manifest, '--timeout', '60s', '-o', 'json']);
      assert.equal(run.code, 0, run.stderr);
      return statusOf(run.stdout);
    };
    const before = await listBackups(env.stateDir, 'src');
    assert.equal(before.length, 2, 'the first backup and the one --replace took');
    const taken: Backup[] = [];
    for (let i = 0; i < 2; i++) {
      if (i > 0) await sleep(2100);
      await up();
      const now = await listBackups(env.stateDir, 'src');
      assert.equal(now.length, 2, 'pruned to keep');
      const newest = now.at(-1);
      assert.ok(newest && ![...taken, ...before].some((b) => b.file === newest.file), `pass ${String(i)} took a backup`);
      taken.push(newest);
    }
    assert.ok(Date.parse(taken[1]?.takenAt ?? '') - Date.parse(taken[0]?.takenAt ?? '') >= 2000, 'no sooner than every');
    assert.deepEqual((await listBackups(env.stateDir, 'src')).map((b) => b.file), taken.map((b) => b.file), 'the newest kept');
    for (const old of before) assert.ok(!existsSync(old.file) && !existsSync(`${old.file}.json`), `${old.file} pruned with its sidecar`);
    assert.equal(env.events('src').filter((e) => e.action === 'TakeBackup' && e.outcome === 'Succeeded').length, 2);

    // The backups folder replaced by a file: nothing can be written there.
    const dir = join(env.stateDir, 'backups', 'src');
    renameSync(dir, `${dir}.aside`);
    writeFileSync(dir, 'in the way');
    try {
      await sleep(2100);
      const doc = await up();
      assert.equal(doc.status.phase, 'Ready', 'a failed backup does not fail the reconcile: still converged');
      const failing = doc.status.conditions.find((c) => c.type === 'BackupFailing');
      assert.equal(failing?.status, 'True', JSON.stringify(doc.status.conditions));
      assert.ok(env.events('src').some((e) => e.action === 'TakeBackup' && e.outcome === 'Failed' && e.type === 'Warning'), 'a warning event');
    } finally {
      rmSync(dir, { force: true });
      renameSync(`${dir}.aside`, dir);
    }
    await sleep(2100);
    const healed = await up();
    assert.equal(healed.status.conditions.find((c) => c.type === 'BackupFailing')?.status, 'False', 'cleared by a good backup');
    assert.equal((await listBackups(env.stateDir, 'src')).length, 2);
  });
});

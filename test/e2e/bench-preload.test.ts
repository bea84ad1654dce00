import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { CliEnv, pidsUnder } from '../support/cli.ts';
import { benchResultOf } from '../support/bench-run.ts';

const env = new CliEnv('127.86');
after(() => {
  env.cleanup();
});

describe('fastplane bench --preload on real etcd', { timeout: 600_000 }, () => {
  test('learners catch up from a snapshot, and the bench breaks catch-up down from their own logs', async () => {
    // 48 MB of 4 KiB values is ~11.7k writes: past the provider's --snapshot-count of 10,000, so the
    // leader has compacted its log and each learner must be sent the database as a snapshot.
    const preloadBytes = 48_000_000;
    const bench = await env.run(['bench', '--modes', 'serial,parallel', '--replicas', '3', '--provisioning-delay', '1s', '--preload', '48MB', '--timeout', '150s', '-o', 'json']);
    const result = benchResultOf(bench);
    console.log(`calibration: ${JSON.stringify(result.calibration)}`);
    // The calibration timed a join with the same keyspace, or gave it up after 90 s (etcd's publish spin).
    assert.equal(result.calibration.keyspaceBytes, preloadBytes);
    assert.ok(result.calibration.catchUpSeconds === null || result.calibration.catchUpSeconds > 0);
    const preload = result.preload;
    assert.ok(preload, 'a preload run reports its catch-up figures');
    assert.equal(preload.bytes, preloadBytes);
    assert.equal(preload.learnersSentSnapshot, '4/4', 'both joins of both strategies were sent a snapshot');

    const run = result.runs[0]!;
    const learners = [run.serial!, run.parallel!].flatMap((s) => s.machines.filter((m) => m.role === 'join'));
    assert.equal(learners.length, 4);
    for (const m of learners) {
      const snap = m.snapshot;
      assert.ok(snap, `${m.name}: its log shows the snapshot`);
      // The snapshot is the leader's backend file: every preloaded byte plus the database's own pages.
      assert.ok(snap.bytes >= preloadBytes, `${m.name}: snapshot of ${String(snap.bytes)} bytes holds the ${String(preloadBytes)} preloaded`);
      assert.ok(snap.receiveSeconds > 0 && snap.applySeconds >= 0, `${m.name}: transfer and apply are timed`);
      assert.ok(
        snap.receiveSeconds + snap.applySeconds <= snap.appliedAfterSeconds + 0.002,
        `${m.name}: transfer ${String(snap.receiveSeconds)} s + apply ${String(snap.applySeconds)} s happen within the ${String(snap.appliedAfterSeconds)} s to applied`,
      );
      assert.ok(m.catchUpSeconds !== null && snap.appliedAfterSeconds <= m.catchUpSeconds, `${m.name}: promoted after its snapshot was applied`);
    }
    const sizes = learners.map((m) => m.snapshot!.bytes).sort((a, b) => a - b);
    assert.equal(preload.snapshotBytes, Math.round((sizes[1]! + sizes[2]!) / 2), 'the copied bytes are the median snapshot size');
    assert.ok(preload.loopbackCopySeconds > 0, 'the loopback copy of the snapshot bytes is measured');
    assert.match(preload.publishTimeouts, /^[0-4]\/4$/);
    assert.ok(preload.dataCatchUpSeconds !== null && preload.catchUpSeconds !== null && preload.dataCatchUpSeconds <= preload.catchUpSeconds);
    assert.equal(preload.dataCatchUpOverCopy, Math.round((preload.dataCatchUpSeconds / preload.loopbackCopySeconds) * 1000) / 1000);
    assert.deepEqual(pidsUnder(join(env.stateDir, 'bench')), [], 'bench stops every etcd it started');
  });
});

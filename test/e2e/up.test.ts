import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { cliEnvFactory, learnerLimitOf, membershipChanges, pidsUnder, statusOf, type CliEnv } from '../support/cli.ts';
import { askEtcd, kvClientFor } from '../support/etcd-direct.ts';

const newEnv = cliEnvFactory();

/**
 * Replays the recorded membership changes: no two overlap in time, never more learners at once than
 * the members run (one below etcd 3.6 or with maxLearners 1).
 */
function assertSerializedMembership(env: CliEnv, cluster: string): void {
  const changes = membershipChanges(env.events(cluster));
  assert.ok(changes.length > 0, 'membership changes were recorded');
  const limit = learnerLimitOf(env.machines(cluster));
  let learners = 0;
  for (let i = 0; i < changes.length; i++) {
    const change = changes[i]!;
    const next = changes[i + 1];
    if (next) assert.ok((change.endedAt ?? change.at) <= next.at, `${change.message} overlaps ${next.message}`);
    if (change.action === 'AddLearner') learners++;
    if (change.action === 'PromoteLearner') learners--;
    assert.ok(learners <= limit, `${String(learners)} learners at once after ${change.message}, limit ${String(limit)}`);
  }
}

describe('fastplane up on real etcd', { timeout: 240_000 }, () => {
  test('converges to 5 healthy voters (asked of etcd itself), keeps data written before the scale-up, and never overlaps membership changes', async () => {
    const env = newEnv('127.62');
    const first = await env.run(['up', '--name', 't', '--replicas', '3', '--provisioning-delay', '3s', '--timeout', '90s', '-o', 'json']);
    assert.equal(first.code, 0, first.stderr);
    const before = statusOf(first.stdout);
    assert.equal(before.status.voters, 3);

    const kv = kvClientFor(before.status);
    try {
      for (let i = 0; i < 20; i++) await kv.put(`/before/${String(i)}`).value(`v${String(i)}`);
    } finally {
      kv.close();
    }

    const second = await env.run(['up', '--name', 't', '--replicas', '5', '--provisioning-delay', '3s', '--timeout', '90s', '-o', 'json']);
    assert.equal(second.code, 0, second.stderr);
    const after5 = statusOf(second.stdout);
    assert.equal(after5.status.machines.length, 5);

    const { members, statuses } = await askEtcd(after5.status);
    assert.equal(members.length, 5, 'etcd lists 5 members');
    assert.equal(members.filter((m) => m.isLearner).length, 0, 'no learners left');
    assert.equal(statuses.length, 5, 'every member answers its own status');
    const leaders = new Set(statuses.map((s) => s.leaderId));
    assert.equal(leaders.size, 1, 'all members agree on the leader');
    assert.notEqual([...leaders][0], '0');
    for (const s of statuses) assert.deepEqual(s.errors, []);
    for (const m of members) assert.match(m.id, /^\d+$/, 'member IDs are decimal strings');

    // Every member, including the two that joined later, serves the keys written before.
    for (const endpoint of after5.status.endpoints) {
      const reader = kvClientFor(after5.status, [endpoint]);
      try {
        const keys = await reader.getAll().prefix('/before/').strings();
        assert.equal(Object.keys(keys).length, 20, `all keys readable through ${endpoint}`);
        assert.equal(keys['/before/7'], 'v7');
      } finally {
        reader.close();
      }
    }
    assertSerializedMembership(env, 't');
  });

  // What each strategy does, not how fast (speed is the benchmarks'): parallel creates every machine at
  // once, serial (KCP's order) creates each only once the one before votes.
  test('parallel 0→5 provisions every machine at once; serial creates each once the one before votes', async (t) => {
    for (const [strategy, prefix] of [['parallel', '127.63'], ['serial', '127.64']] as const) {
      const env = newEnv(prefix);
      // On 3.4.23: from 3.6 a joining member may wait 7 s more for its first publish, at random (docs/etcd-behaviour.md).
      const run = await env.run(['up', '--name', strategy, '--replicas', '5', '--version', '3.4.23', '--strategy', strategy, '--provisioning-delay', '3s', '--timeout', '120s', '-o', 'json']);
      assert.equal(run.code, 0, run.stderr);
      assert.equal(statusOf(run.stdout).status.voters, 5);
      assertSerializedMembership(env, strategy);
      const done = env.events(strategy).filter((e) => e.outcome === 'Succeeded');
      const created = done.filter((e) => e.action === 'CreateMachine').map((e) => e.at).sort((a, b) => a - b);
      const voted = done.filter((e) => e.action === 'InitCluster' || e.action === 'PromoteLearner').map((e) => e.endedAt ?? e.at).sort((a, b) => a - b);
      assert.equal(created.length, 5);
      assert.equal(voted.length, 5);
      if (strategy === 'parallel') assert.ok(created[4]! < voted[0]!, 'every machine was created before the first one voted');
      else for (let k = 1; k < 5; k++) assert.ok(created[k]! >= voted[k - 1]!, `machine ${String(k + 1)} was created after ${String(k)} voted`);
      t.diagnostic(`0→5, 3 s provisioning, ${strategy}: ${String(run.ms / 1000)} s`);
      const down = await env.run(['down', strategy]);
      assert.equal(down.code, 0, down.stderr);
    }
  });

  test('a dead voter holds the join gate and status --explain says why; down leaves no etcd process of the cluster and no data dir', async () => {
    const env = newEnv('127.65');
    const up = await env.run(['up', '--name', 'gone', '--replicas', '3', '--timeout', '60s']);
    assert.equal(up.code, 0, up.stderr);
    assert.equal(pidsUnder(join(env.stateDir, 'clusters', 'gone')).length, 3, 'three member processes ran');

    // A dead voter holds the join gate; the run says so, and so does status --explain.
    for (const pid of pidsUnder(join(env.stateDir, 'clusters', 'gone', 'machines', 'gone-2'))) process.kill(pid, 'SIGKILL');
    const held = await env.run(['scale', 'gone', '--replicas', '5', '--timeout', '3s']);
    assert.equal(held.code, 4, 'not converged by the deadline');
    assert.match(held.stderr, /\[VoterUnhealthy\] .*voter gone-2 is not healthy/);
    const explain = await env.run(['status', 'gone', '--explain']);
    assert.equal(explain.code, 0, explain.stderr);
    assert.match(explain.stdout, /gone is waiting for:\n.*waits at the join gate: voter gone-2 is not healthy/);

    const down = await env.run(['down', 'gone']);
    assert.equal(down.code, 0, down.stderr);
    assert.deepEqual(pidsUnder(join(env.stateDir, 'clusters', 'gone')), []);
    assert.equal(existsSync(join(env.stateDir, 'clusters', 'gone')), false);
    const status = await env.run(['status', 'gone']);
    assert.equal(status.code, 2, 'the control plane is gone from the records too');
  });

  test('a CLI killed right after adding a learner leaves a state the next up finishes', async () => {
    const env = newEnv('127.66');
    const crashed = await env.run(['up', '--name', 'c', '--replicas', '3', '--timeout', '60s'], { FASTPLANE_FAILPOINTS: 'after-add-learner' });
    assert.equal(crashed.signal, 'SIGKILL', 'the failpoint killed the CLI');
    const resumed = await env.run(['up', '--name', 'c', '--timeout', '60s', '-o', 'json']);
    assert.equal(resumed.code, 0, resumed.stderr);
    const { members } = await askEtcd(statusOf(resumed.stdout).status);
    assert.equal(members.length, 3);
    assert.equal(members.filter((m) => m.isLearner).length, 0);
    assert.ok(env.events('c').some((e) => e.action === 'StartMember' && e.outcome === 'Succeeded'), 'the added learner was started by the second run');
  });
});

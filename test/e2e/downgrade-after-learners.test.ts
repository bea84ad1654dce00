import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cliEnvFactory, statusOf } from '../support/cli.ts';
import { adminFor, kvClientFor } from '../support/etcd-direct.ts';
import { growWithLearners } from '../support/grow-with-learners.ts';

// The learner limit across a downgrade: a 3.6 cluster grown by several learners at once, then rolled
// down to 3.5 (whose limit is 1) by etcd's protocol, members restarted in place. Each member, asked
// alone what it has applied, must list the same members as every other.
const newEnv = cliEnvFactory();
const KEYS = 1_000;

describe('a downgrade after parallel learners (etcd 3.6.17 -> 3.5.36)', { timeout: 600_000 }, () => {
  test('1 -> 5 with several learners at once, then down to 3.5.36: every member lists the same five voters, every key on every member', async () => {
    const env = newEnv('127.21');
    const { samples } = await growWithLearners(env, 'dl', { keys: KEYS, prefix: '/dl/' });
    const most = Math.max(...samples.map((s) => s.learners));
    assert.ok(most >= 2, `several learners caught up at once (most seen: ${String(most)})`);

    const down = await env.run(['rollout', 'dl', '--version', '3.5.36', '--timeout', '300s', '-o', 'json']);
    assert.equal(down.code, 0, down.stderr.slice(-3000));
    const after = statusOf(down.stdout);
    assert.deepEqual(env.machines('dl').map((m) => m.version), ['3.5.36', '3.5.36', '3.5.36', '3.5.36', '3.5.36'], 'every member restarted in place on 3.5.36');
    const admin = adminFor(after.status);
    try {
      const lists = await Promise.all(after.status.endpoints.map(async (endpoint) => (await admin.memberList([endpoint], { linearizable: false })).map((m) => `${m.id}${m.isLearner ? ' (learner)' : ''}`).sort()));
      const [reference] = lists;
      assert.equal(reference?.length, 5, JSON.stringify(lists));
      assert.ok(reference.every((m) => !m.endsWith('(learner)')), JSON.stringify(reference));
      for (const [i, list] of lists.entries()) assert.deepEqual(list, reference, `${after.status.endpoints[i] ?? ''} lists what the others list`);
    } finally {
      await admin.close();
    }
    for (const endpoint of after.status.endpoints) {
      const reader = kvClientFor(after.status, [endpoint]);
      try {
        assert.equal(await reader.getAll().prefix('/dl/').count(), KEYS, `every key through ${endpoint}`);
      } finally {
        reader.close();
      }
    }
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cliEnvFactory, learnerLimitOf, membershipChanges } from '../support/cli.ts';
import { askEtcd, kvClientFor } from '../support/etcd-direct.ts';
import { growWithLearners } from '../support/grow-with-learners.ts';

// Parallel learners on real etcd 3.6 with a small keyspace: the joiners of one scale-up catch up
// together, only the promotions take turns, and etcd never lists more learners than its members run.
const newEnv = cliEnvFactory();
const KEYS = 2_000;

describe('parallel learners on etcd 3.6.17 (maxLearners auto)', { timeout: 300_000 }, () => {
  test('1 -> 5 with 8 MB written first: several learners at once, never more than the limit, promotions one at a time, every key on every member', async () => {
    const env = newEnv('127.128');
    const { after, samples } = await growWithLearners(env, 'pl', { keys: KEYS, prefix: '/pl/' });

    const machines = env.machines('pl');
    assert.deepEqual(machines.map((m) => m.maxLearners), [8, 8, 8, 8, 8], 'every member started with --max-learners 8');
    const limit = learnerLimitOf(machines);
    const most = Math.max(...samples.map((s) => s.learners));
    console.log(`most learners listed at once: ${String(most)} (limit ${String(limit)}), ${String(samples.length)} samples`);
    assert.ok(most >= 2, `several learners caught up at once (most seen: ${String(most)})`);
    assert.ok(most <= limit, `never more than ${String(limit)} learners (most seen: ${String(most)})`);

    const events = env.events('pl');
    const changes = membershipChanges(events);
    for (let i = 1; i < changes.length; i++) assert.ok((changes[i - 1]!.endedAt ?? 0) <= changes[i]!.at, `${changes[i]!.message} overlaps the change before it`);
    assert.equal(changes.filter((e) => e.action === 'PromoteLearner').length, 4, 'four promotions');
    const refused = events.filter((e) => e.outcome === 'Refused' && /too many learner/i.test(e.message));
    assert.deepEqual(refused.map((e) => e.message), [], 'etcd never refused an add for the learner limit');

    const { members } = await askEtcd(after.status);
    assert.equal(members.filter((m) => !m.isLearner).length, 5);
    for (const endpoint of after.status.endpoints) {
      const reader = kvClientFor(after.status, [endpoint]);
      try {
        assert.equal(await reader.getAll().prefix('/pl/').count(), KEYS, `every key through ${endpoint}`);
      } finally {
        reader.close();
      }
    }
    assert.equal((await env.run(['down', 'pl'])).code, 0);
  });
});

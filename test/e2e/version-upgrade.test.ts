import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cliEnvFactory, membershipChanges, statusOf } from '../support/cli.ts';
import { askEtcd, kvClientFor } from '../support/etcd-direct.ts';

// etcd's upgrade guide on real etcd: a 3.5 cluster below 3.5.20 goes to the newest 3.5 patch before
// 3.6 (learner promotions persist only from 3.5.20), and a skipped minor is refused before anything
// changes. (3.6.17 -> 3.7.4 rollouts run in lifecycle, failpoints and chaos.)
const newEnv = cliEnvFactory();

describe('upgrades across a minor follow etcd\'s upgrade guide', { timeout: 420_000 }, () => {
  test('3.5.16 built by learner joins, rolled to 3.6.17: through 3.5.36 first, every key kept, no change refused for the learner limit; 3.5 -> 3.7 refused naming the path', async () => {
    const env = newEnv('127.129');
    const up = await env.run(['up', '--name', 'hop', '--replicas', '3', '--version', '3.5.16', '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const before = statusOf(up.stdout);
    const kv = kvClientFor(before.status);
    try {
      for (let i = 0; i < 200; i++) await kv.put(`/hop/${String(i).padStart(3, '0')}`).value(`v${String(i)}`);
    } finally {
      kv.close();
    }

    const skip = await env.run(['rollout', 'hop', '--version', '3.7.4']);
    assert.equal(skip.code, 2, skip.stderr);
    assert.match(skip.stderr, /cannot skip a minor version \(3\.5\.16 -> 3\.7\.4\); etcd's path is 3\.5\.16 -> 3\.5\.36 -> 3\.6\.17 -> 3\.7\.4/);
    assert.ok(env.machines('hop').every((m) => m.version === '3.5.16'), 'nothing changed');

    const rolled = await env.run(['rollout', 'hop', '--version', '3.6.17', '--timeout', '300s', '-o', 'json']);
    assert.equal(rolled.code, 0, rolled.stderr);
    const after = statusOf(rolled.stdout);
    const { members, statuses } = await askEtcd(after.status);
    assert.equal(members.filter((m) => !m.isLearner).length, 3);
    assert.deepEqual(statuses.map((s) => s.version), ['3.6.17', '3.6.17', '3.6.17']);

    const events = env.events('hop');
    const created = events.filter((e) => e.action === 'CreateMachine' && e.outcome === 'Succeeded').map((e) => /\(etcd ([\d.]+)\)/.exec(e.message)?.[1]);
    assert.deepEqual(created.slice(3).sort(), ['3.5.36', '3.5.36', '3.5.36', '3.6.17', '3.6.17', '3.6.17'], `three machines at the hop, then three at the target: ${created.join(', ')}`);
    const firstTarget = events.findIndex((e) => e.action === 'CreateMachine' && e.message.includes('(etcd 3.6.17)'));
    const lastHop = events.map((e) => e.action === 'CreateMachine' && e.message.includes('(etcd 3.5.36)')).lastIndexOf(true);
    assert.ok(lastHop < firstTarget, 'every hop machine before the first 3.6 one');
    assert.deepEqual(events.filter((e) => e.outcome === 'Refused' && /too many learner/i.test(e.message)).map((e) => e.message), []);
    const changes = membershipChanges(events);
    for (let i = 1; i < changes.length; i++) assert.ok((changes[i - 1]!.endedAt ?? 0) <= changes[i]!.at, 'membership changes never overlap');

    const reader = kvClientFor(after.status);
    try {
      assert.equal(await reader.getAll().prefix('/hop/').count(), 200, 'every key written before the rollout');
    } finally {
      reader.close();
    }
    assert.equal((await env.run(['down', 'hop'])).code, 0);
  });
});

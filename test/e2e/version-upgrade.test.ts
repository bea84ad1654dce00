import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EtcdctlDowngrade } from '../../src/adapters/etcd/etcd-downgrade.ts';
import { findEtcdBinary } from '../../src/adapters/etcd/etcd-binaries.ts';
import { ContinuousWriter } from '../chaos/writer.ts';
import { cliEnvFactory, membershipChanges, statusOf } from '../support/cli.ts';
import { askEtcd, kvClientFor } from '../support/etcd-direct.ts';

// etcd's upgrade and downgrade guides on real etcd, one cluster throughout: a 3.5 cluster below 3.5.24
// goes to the newest 3.5 patch before 3.6 (learner promotions persist, also through a rolling
// replacement, only from 3.5.24), then on to 3.7 by replacement; back down by etcd's protocol,
// 3.7 -> 3.6 -> 3.5, members restarted in place under a continuous writer. Skipped minors and downgrades without a protocol are refused before
// anything changes.
const newEnv = cliEnvFactory();
const env = newEnv('127.129');

describe('version changes across a minor follow etcd\'s guides', { timeout: 600_000 }, () => {
  test('3.5.16 built by learner joins, rolled to 3.6.17: through 3.5.36 first, every key kept, no change refused for the learner limit; 3.5 -> 3.7 refused naming the path', async () => {
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
  });

  test('3.6.17 -> 3.7.4 by replacement; back down 3.7.4 -> 3.6.17 -> 3.5.36 by etcd\'s protocol with writes throughout: no acknowledged write lost, no machine replaced, cluster version 3.5', async (t) => {
    const up = await env.run(['rollout', 'hop', '--version', '3.7.4', '--timeout', '300s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const doc = statusOf(up.stdout);
    assert.deepEqual((await askEtcd(doc.status)).statuses.map((s) => s.version), ['3.7.4', '3.7.4', '3.7.4']);
    const machines = env.machines('hop').map((m) => m.name);

    const skip = await env.run(['rollout', 'hop', '--version', '3.5.36']);
    assert.equal(skip.code, 2, skip.stderr);
    assert.match(skip.stderr, /cannot skip a minor version going down \(3\.7\.4 -> 3\.5\.36\); etcd's downgrade path is 3\.7\.4 -> 3\.6\.17 -> 3\.5\.36/);
    assert.ok(env.machines('hop').every((m) => m.version === '3.7.4'), 'nothing changed');

    const writer = new ContinuousWriter(doc.status, '/downgrade/');
    const eventsBefore = env.events('hop').length;
    writer.start();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const to36 = await env.run(['rollout', 'hop', '--version', '3.6.17', '--timeout', '180s', '-o', 'json']);
    const to35 = to36.code === 0 ? await env.run(['rollout', 'hop', '--version', '3.5.36', '--timeout', '180s', '-o', 'json']) : to36;
    await new Promise((resolve) => setTimeout(resolve, 500));
    await writer.stop();
    assert.equal(to36.code, 0, to36.stderr);
    assert.equal(to35.code, 0, to35.stderr);
    const after = statusOf(to35.stdout);
    const report = await writer.verify(after.status);
    assert.ok(report.writesAcked > 0, 'the writer got writes through');
    assert.equal(report.ackedButLost, 0, `acknowledged writes lost: ${JSON.stringify(report)}`);
    t.diagnostic(`writer through both downgrades: ${JSON.stringify(report)}`);

    // The members were restarted in place: same machines, no machine created or member changed.
    assert.deepEqual(env.machines('hop').map((m) => m.name), machines);
    const events = env.events('hop').slice(eventsBefore);
    assert.deepEqual(events.filter((e) => e.action === 'CreateMachine' || membershipChanges([e]).length > 0).map((e) => e.message), []);
    const downgrades = events.filter((e) => e.action === 'DowngradeCluster');
    assert.deepEqual(downgrades.map((e) => e.outcome), ['Succeeded', 'Succeeded'], downgrades.map((e) => e.message).join('\n'));
    for (const [i, minor] of ['3.6', '3.5'].entries()) assert.match(downgrades[i]?.message ?? '', new RegExp(`downgrade to ${minor} validated and enabled.*cluster version ${minor}`));

    const { statuses } = await askEtcd(after.status);
    assert.deepEqual(statuses.map((s) => s.version), ['3.5.36', '3.5.36', '3.5.36']);
    const tls = after.status.tls;
    const versions = new EtcdctlDowngrade({ findBinary: findEtcdBinary, ...(tls === undefined ? {} : { tls }) });
    for (const endpoint of after.status.endpoints) assert.equal((await versions.versions(endpoint)).cluster, '3.5.0', endpoint);

    const noProtocol = await env.run(['rollout', 'hop', '--version', '3.4.23']);
    assert.equal(noProtocol.code, 2, noProtocol.stderr);
    assert.match(noProtocol.stderr, /cannot go down to an older minor version \(3\.5\.36 -> 3\.4\.23\): etcd's downgrade protocol goes one minor down from 3\.6 or later/);
    assert.ok(env.machines('hop').every((m) => m.version === '3.5.36'), 'nothing changed');
    assert.equal((await env.run(['down', 'hop'])).code, 0);
  });
});

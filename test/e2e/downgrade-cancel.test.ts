import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { findEtcdBinary } from '../../src/adapters/etcd/etcd-binaries.ts';
import { EtcdctlDowngrade } from '../../src/adapters/etcd/etcd-downgrade.ts';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { cliEnvFactory, statusOf } from '../support/cli.ts';

// A downgrade stopped after etcd's `downgrade enable` and then reverted (the spec back at the higher
// minor) leaves the cluster version pinned at the lower minor: fastplane says so and cancels it.
const newEnv = cliEnvFactory();
const env = newEnv('127.38');

function pinnedCondition(doc: ControlPlaneStatusDocument): string | undefined {
  const condition = doc.status.conditions.find((c) => c.type === 'ClusterVersionPinned');
  return condition === undefined ? undefined : `${condition.status} ${condition.reason}`;
}

describe('a downgrade left enabled', { timeout: 300_000 }, () => {
  test('3.7.4 with downgrade enabled to 3.6 and the spec still at 3.7.4: status reports ClusterVersionPinned, up cancels it and the cluster version rises to 3.7 again', async () => {
    const up = await env.run(['up', '--name', 'pin', '--replicas', '1', '--version', '3.7.4', '--timeout', '90s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const doc = statusOf(up.stdout);
    const { tls, endpoints } = doc.status;
    // A member that just started may not have published its cluster version yet: the condition is
    // judged once status has read one.
    let current: string | undefined;
    for (let tries = 0; current === undefined && tries < 40; tries++) {
      const read = await env.run(['status', 'pin', '-o', 'json']);
      current = read.code === 0 ? pinnedCondition(statusOf(read.stdout)) : undefined;
      if (current === undefined) await new Promise((resolve) => setTimeout(resolve, 250));
    }
    const etcdctl = new EtcdctlDowngrade({ findBinary: findEtcdBinary, ...(tls === undefined ? {} : { tls }) });
    const clusterVersions = async (): Promise<string[]> => Promise.all(endpoints.map(async (e) => (await etcdctl.versions(e)).cluster));

    // As a downgrade job stopped right after its enable leaves it.
    await etcdctl.run('validate', endpoints, '3.6', '3.7.4');
    await etcdctl.run('enable', endpoints, '3.6', '3.7.4');
    while ((await clusterVersions()).some((v) => v !== '3.6.0')) await new Promise((resolve) => setTimeout(resolve, 250));

    const pinned = await env.run(['status', 'pin', '-o', 'json']);
    assert.equal(pinned.code, 0, pinned.stderr);

    const back = await env.run(['up', '--name', 'pin', '--replicas', '1', '--version', '3.7.4', '--timeout', '120s', '-o', 'json']);
    assert.equal(back.code, 0, back.stderr);
    assert.deepEqual(await clusterVersions(), ['3.7.0'], 'the downgrade was cancelled and the cluster version rose');
    assert.deepEqual([current, pinnedCondition(statusOf(pinned.stdout)), pinnedCondition(statusOf(back.stdout))], ['False ClusterVersionCurrent', 'True DowngradeLeftEnabled', 'False ClusterVersionCurrent']);
    const cancels = env.events('pin').filter((e) => e.action === 'CancelDowngrade');
    assert.deepEqual(cancels.map((e) => e.outcome), ['Succeeded'], cancels.map((e) => e.message).join('\n'));
    assert.match(cancels[0]?.message ?? '', /downgrade to 3\.6 cancelled .*cluster version back at 3\.7/);
    assert.equal((await env.run(['down', 'pin'])).code, 0);
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { validateVersionChange } from '../../src/api/version-change.ts';
import { pendingDowngrade, protocolDowngrade, upgradePath, versionStep } from '../../src/api/version-path.ts';
import { plan } from '../../src/planner/plan.ts';
import { healthyCluster, NOW, observed, spec } from '../support/observed.ts';

describe('the upgrade path of etcd\'s guides', () => {
  test('a 3.5 cluster below 3.5.24 rolls to the newest 3.5 patch before 3.6; at 3.5.24 or later it goes straight on', () => {
    const table: [string[], string, string, boolean][] = [
      [['3.5.16', '3.5.16', '3.5.16'], '3.6.17', '3.5.36', true],
      [['3.5.16', '3.5.36', '3.5.36'], '3.6.17', '3.5.36', true],
      [['3.5.36', '3.5.36', '3.5.36'], '3.6.17', '3.6.17', false],
      [['3.5.30', '3.5.30', '3.5.30'], '3.6.17', '3.6.17', false],
      [['3.5.20', '3.5.23', '3.5.23'], '3.6.17', '3.5.36', true],
      [['3.5.24'], '3.6.17', '3.6.17', false],
      [['3.5.36', '3.6.17', '3.6.17'], '3.6.17', '3.6.17', false],
      [['3.6.17', '3.6.17', '3.6.17'], '3.7.4', '3.7.4', false],
      [['3.4.23', '3.4.23', '3.4.23'], '3.5.16', '3.5.16', false],
      [['3.5.16'], '3.5.30', '3.5.30', false],
      [[], '3.6.17', '3.6.17', false],
    ];
    for (const [running, target, version, hop] of table) {
      const step = versionStep(running, target);
      assert.equal(step.version, version, `${running.join(',')} -> ${target}`);
      assert.equal(step.hop !== undefined, hop, `${running.join(',')} -> ${target}: ${step.hop ?? 'no hop'}`);
    }
    assert.match(versionStep(['3.5.16'], '3.6.17').hop ?? '', /rolling to 3\.5\.36 first: .* 3\.5\.24 or later before 3\.6/);
  });

  test('a skipped minor is refused naming the path etcd supports', () => {
    assert.deepEqual(upgradePath('3.5.16', '3.7.4'), ['3.5.16', '3.5.36', '3.6.17', '3.7.4']);
    assert.deepEqual(upgradePath('3.5.30', '3.6.17'), ['3.5.30', '3.6.17']);
    assert.deepEqual(upgradePath('3.4.23', '3.6.17'), ['3.4.23', '3.5.36', '3.6.17']);
    assert.equal(
      validateVersionChange('3.5.16', '3.7.4'),
      "spec.version: cannot skip a minor version (3.5.16 -> 3.7.4); etcd's path is 3.5.16 -> 3.5.36 -> 3.6.17 -> 3.7.4, one rollout per minor: upgrade to 3.6 first",
    );
  });

  test('the planner creates the hop version and says why, as a step of the plan', () => {
    const c = healthyCluster(3, { version: '3.5.16' });
    const decision = plan(spec({ version: '3.6.17', maxSurge: 1 }), observed(c), NOW);
    const created = decision.machineActions.filter((a) => a.kind === 'CreateMachine');
    assert.deepEqual(created.map((a) => a.version), ['3.5.36']);
    assert.match(decision.waits.find((w) => w.code === 'UpgradeHop')?.message ?? '', /rolling to 3\.5\.36 first/);
    const on = plan(spec({ version: '3.6.17', maxSurge: 1 }), observed(healthyCluster(3, { version: '3.5.36' })), NOW);
    assert.deepEqual(on.machineActions.filter((a) => a.kind === 'CreateMachine').map((a) => a.version), ['3.6.17']);
    assert.ok(!on.waits.some((w) => w.code === 'UpgradeHop'));
  });
});

describe("downgrades by etcd's own protocol", () => {
  test('only one minor down from 3.6 or later has a protocol', () => {
    const table: [string, string, string | undefined][] = [
      ['3.6.17', '3.5.36', '3.6 -> 3.5'],
      ['3.7.4', '3.6.17', '3.7 -> 3.6'],
      ['3.6.0', '3.5.0', '3.6 -> 3.5'],
      ['3.5.36', '3.4.23', undefined],
      ['3.7.4', '3.5.36', undefined],
      ['3.6.17', '3.4.23', undefined],
      ['3.6.17', '3.6.1', undefined],
      ['3.5.16', '3.6.17', undefined],
    ];
    for (const [from, to, expected] of table) {
      const d = protocolDowngrade(from, to);
      assert.equal(d && `${d.from} -> ${d.to}`, expected, `${from} -> ${to}`);
    }
    assert.deepEqual(pendingDowngrade(['3.5.36', '3.6.17', '3.6.12'], '3.5.36'), { from: '3.6', to: '3.5', running: '3.6.17', target: '3.5.36' });
    assert.equal(pendingDowngrade(['3.5.36', '3.5.36'], '3.5.36'), undefined);
    assert.equal(pendingDowngrade(['3.6.17'], '3.7.4'), undefined);
  });

  test('the planner replaces no machine for a downgrade: one care job restarts the members in place, and the cluster has not converged until it is done', () => {
    for (const versions of [['3.6.17', '3.6.17', '3.6.17'], ['3.5.36', '3.6.17', '3.5.36']]) {
      const c = healthyCluster(3, { version: '3.6.17' });
      c.machines.forEach((m, i) => (m.record.version = versions[i] ?? '3.6.17'));
      const decision = plan(spec({ version: '3.5.36', maxSurge: 1 }), observed(c), NOW);
      assert.deepEqual(decision.machineActions, [], versions.join(','));
      assert.equal(decision.membershipAction, undefined);
      assert.deepEqual(decision.careActions, [{ kind: 'DowngradeCluster', version: '3.5.36', reason: 'VersionDowngrade' }]);
      assert.equal(decision.converged, false);
      const left = c.machines.filter((m) => m.record.version === '3.6.17').map((m) => m.record.name);
      assert.match(decision.waits.find((w) => w.code === 'Downgrading')?.message ?? '', new RegExp(`${String(left.length)} still on 3\\.6: ${left.join(', ')}`));
      assert.equal(decision.conditions.find((k) => k.type === 'UpToDate')?.status, 'False');
    }
    // The template follows the minor (maxLearners auto: 8 from 3.6, 1 below): the in-place restart applies it, no replacement first.
    const retemplated = plan(spec({ version: '3.5.36', templateHash: 'of-3.5', maxSurge: 1 }), observed(healthyCluster(3, { version: '3.6.17' })), NOW);
    assert.deepEqual(retemplated.machineActions, []);
    assert.deepEqual(retemplated.careActions?.map((a) => a.kind), ['DowngradeCluster']);
    const done = plan(spec({ version: '3.5.36', maxSurge: 1 }), observed(healthyCluster(3, { version: '3.5.36' })), NOW);
    assert.equal(done.converged, true);
    assert.equal(done.careActions, undefined);
  });

  test('the downgrade waits for a settled cluster, and a machine created meanwhile runs the higher version (a lower one cannot join)', () => {
    const c = healthyCluster(2, { version: '3.6.17' });
    const decision = plan(spec({ version: '3.5.36' }), observed(c), NOW);
    assert.equal(decision.careActions, undefined);
    assert.match(decision.waits.find((w) => w.code === 'DowngradeDeferred')?.message ?? '', /waits until the cluster has converged/);
    assert.deepEqual(decision.machineActions.filter((a) => a.kind === 'CreateMachine').map((a) => a.version), ['3.6.17']);
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { validateVersionChange } from '../../src/api/version-change.ts';
import { upgradePath, versionStep } from '../../src/api/version-path.ts';
import { plan } from '../../src/planner/plan.ts';
import { healthyCluster, NOW, observed, spec } from '../support/observed.ts';

describe('the upgrade path of etcd\'s guides', () => {
  test('a 3.5 cluster below 3.5.20 rolls to the newest 3.5 patch before 3.6; at 3.5.20 or later it goes straight on', () => {
    const table: [string[], string, string, boolean][] = [
      [['3.5.16', '3.5.16', '3.5.16'], '3.6.17', '3.5.36', true],
      [['3.5.16', '3.5.36', '3.5.36'], '3.6.17', '3.5.36', true],
      [['3.5.36', '3.5.36', '3.5.36'], '3.6.17', '3.6.17', false],
      [['3.5.30', '3.5.30', '3.5.30'], '3.6.17', '3.6.17', false],
      [['3.5.20'], '3.6.17', '3.6.17', false],
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
    assert.match(versionStep(['3.5.16'], '3.6.17').hop ?? '', /rolling to 3\.5\.36 first: .* 3\.5\.20 or later before 3\.6/);
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

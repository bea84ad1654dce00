import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { validateControlPlane, type ControlPlane } from '../../src/api/control-plane.ts';
import type { Decision, Observed } from '../../src/planner/types.ts';
import { MAX_ORDINAL } from '../../src/sim/model-types.ts';
import { Simulation } from '../../src/sim/simulate.ts';
import { assertConvergedInModel, InvariantChecker, NAME, type Trace } from './invariant-checker.ts';

/**
 * Limits that end loops, on the model: freed ordinals (and so addresses) are reused, so replacements
 * never run a cluster out of its 254; a provider that always fails ends Blocked instead of being asked
 * for replacements until the addresses run out.
 */

function manifest(spec: Record<string, unknown>): ControlPlane {
  return validateControlPlane({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name: NAME }, spec });
}

function checked(sim: Simulation): { onPass: (pass: { observed: Observed; decision: Decision; now: number }) => void; checker: InvariantChecker; trace: Trace } {
  const trace: Trace = { log: [], passes: 0 };
  const checker = new InvariantChecker(sim, trace);
  return { onPass: checker.onPass.bind(checker), checker, trace };
}

describe('limits that end loops', () => {
  test('300 replacements of crashed members never exhaust the cluster ordinals (freed ones are reused)', async () => {
    // minHealthyPeriod 0s: every crash starts a new remediation sequence, so maxRetry never stops it.
    const desired = manifest({ replicas: 3, remediation: { unhealthyAfter: '2s', minHealthyPeriod: '0s' } });
    const sim = new Simulation(desired, { seed: 11 });
    const { onPass, checker } = checked(sim);
    assert.equal((await sim.run(600_000, onPass)).outcome, 'Converged');
    let highest = 0;
    for (let i = 0; i < 300; i++) {
      // A follower: with the leader gone, the 3 voters would be leaderless for an election, and a
      // member stopped while quorum is missing is started again rather than replaced.
      const snapshot = sim.world.snapshot(NAME);
      const followers = snapshot.members.filter((m) => m.machine !== undefined && m.id !== snapshot.leaderId);
      const victim = followers[i % followers.length];
      assert.ok(victim?.machine !== undefined);
      sim.world.killMember(victim.machine);
      const result = await sim.run(600_000, onPass);
      assert.equal(result.outcome, 'Converged', `replacement ${String(i + 1)}: ${JSON.stringify(result.decision.waits)}`);
      highest = Math.max(highest, ...sim.store.inspect(NAME).machines.map((m) => m.ordinal));
    }
    const failed = sim.store.inspect(NAME).events.filter((e) => e.action === 'MarkMachineFailed').length;
    assert.equal(failed, 300, 'every crash was remediated by a replacement');
    // 3 members, the failed one and its replacement, the init machine's ordinal kept out: a handful.
    assert.ok(highest <= 6, `ordinals in use reached ${String(highest)} (of ${String(MAX_ORDINAL)})`);
    checker.checkWorld();
    checker.checkEventLog();
    assertConvergedInModel(sim, 3, desired.spec.version, 'after 300 replacements');
  });

  for (const when of ['on a new cluster', 'when a crashed member is replaced'] as const) {
    test(`a provider that always fails ends Blocked with CannotBeRemediated and its last error (${when})`, async () => {
      const sim = new Simulation(manifest({ replicas: 3, provider: { provisioningDelay: '1s' }, remediation: { unhealthyAfter: '2s', maxRetry: 3 } }), { seed: 5, blockedGraceMs: 15_000 });
      const { onPass, checker } = checked(sim);
      if (when === 'on a new cluster') sim.world.failEveryProvisioning();
      else {
        assert.equal((await sim.run(600_000, onPass)).outcome, 'Converged');
        sim.world.failEveryProvisioning();
        sim.world.killMember('prop-2');
      }
      const result = await sim.run(3_600_000, onPass);
      assert.equal(result.outcome, 'Blocked', JSON.stringify(result.decision.waits));
      assert.equal(result.decision.blocked?.code, 'CannotBeRemediated');
      const remediating = result.decision.conditions.find((c) => c.type === 'Remediating');
      assert.equal(remediating?.reason, 'CannotBeRemediated');
      assert.match(remediating.message, /maxRetry 3.*ProvisioningFailed: simulated provisioning failure/);
      // 1 + maxRetry remediations in the sequence, then no more machines are asked for.
      const marks = sim.store.inspect(NAME).events.filter((e) => e.action === 'MarkMachineFailed').length;
      assert.equal(marks, 4, `${String(marks)} machines marked failed`);
      checker.checkWorld();
    });
  }
});

import assert from 'node:assert/strict';
import fc from 'fast-check';
import { quorum } from '../../src/domain/quorum.ts';
import { Simulation } from '../../src/sim/simulate.ts';
import { changeScenarioArb, faultScenarioArb, oddReplicas, raceScenarioArb } from './arbitraries.ts';
import { InvariantChecker, manifestFor, NAME, runScenario, type Scenario, type SpecInput, type Trace } from './harness.ts';

/**
 * The property bodies, shared by invariants.test.ts (main thread) and property-worker.ts (the one it
 * runs on a second core). Each resolves to a one-line summary or rejects with fast-check's report
 * (seed, path and the shrunk counterexample).
 */

export type PropertyName = 'faults' | 'changes' | 'races' | 'majority';

export const BASE_SPEC: SpecInput = {
  replicas: 3,
  version: '3.4.23',
  strategy: 'parallel',
  maxSurge: 1,
  failureDomains: [],
  provisioning: { minMs: 0, maxMs: 0 },
  maxConcurrentProvisioning: 10,
  learnerStuckAfterMs: 120_000,
  unhealthyAfterMs: 10_000,
};

async function scenarios(arb: fc.Arbitrary<Scenario>, runs: number, label: string): Promise<string> {
  let worst = 0;
  let passes = 0;
  await fc.assert(
    fc.asyncProperty(arb, async (s) => {
      const { settleMs, checker } = await runScenario(s);
      worst = Math.max(worst, settleMs);
      passes += checker.passes;
    }),
    { numRuns: runs },
  );
  return `${label}: ${String(runs)} runs, ${String(passes)} passes checked, slowest convergence after the last fault or change ${String(Math.round(worst / 1000))} s (virtual)`;
}

/** Random specs with every fault kind (at random times or lying in wait for a decision) and controller crashes. */
export function faultsProperty(runs: number): Promise<string> {
  return scenarios(faultScenarioArb, runs, 'faults');
}

/** Spec changes mid-run (scale 1..9, upgrade as a rollout) with faults and controller crashes. */
export function changesProperty(runs: number): Promise<string> {
  return scenarios(changeScenarioArb, runs, 'changes');
}

/** A converged cluster's spec changes while member crashes lie in wait for the membership decisions. */
export function racesProperty(runs: number): Promise<string> {
  return scenarios(raceScenarioArb, runs, 'races');
}

/**
 * Killing a majority of voters of a converged cluster (at least one survives): quorum is lost for
 * good, since the model restarts no dead member and fastplane never forces a new cluster. The run
 * must end Blocked with QuorumLost, attempt nothing, and remove no member.
 */
export async function majorityProperty(runs: number): Promise<string> {
  const arb = fc.record({
    seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
    replicas: oddReplicas.filter((n) => n >= 3),
    strategy: fc.constantFrom('parallel' as const, 'serial' as const),
    provisioningMs: fc.integer({ min: 0, max: 3000 }),
    extra: fc.nat({ max: 8 }),
    picks: fc.array(fc.nat({ max: 100 }), { minLength: 9, maxLength: 9 }),
  });
  await fc.assert(
    fc.asyncProperty(arb, async ({ seed, replicas, strategy, provisioningMs, extra, picks }) => {
      const spec = { ...BASE_SPEC, replicas, strategy, provisioning: { minMs: 0, maxMs: provisioningMs } };
      const sim = new Simulation(manifestFor(spec), { seed, blockedGraceMs: 15_000 });
      const trace: Trace = { log: [], passes: 0 };
      const checker = new InvariantChecker(sim, trace);
      const onPass = checker.onPass.bind(checker);
      assert.equal((await sim.run(3_600_000, onPass)).outcome, 'Converged');
      // More than the cluster can lose, fewer than all.
      const tolerable = replicas - quorum(replicas);
      const kills = tolerable + 1 + (extra % (replicas - 1 - tolerable));
      const names = sim.world.snapshot(NAME).machines.map((m) => m.name);
      const victims: string[] = [];
      for (const pick of picks) {
        const remaining = names.filter((n) => !victims.includes(n));
        if (victims.length < kills) victims.push(remaining[pick % remaining.length]!);
      }
      for (const name of victims) sim.world.killMember(name);
      trace.log.push(`killed ${victims.join(',')}`);
      const eventsBefore = sim.store.listEvents(NAME).length;
      const result = await sim.run(600_000, onPass);
      assert.equal(result.outcome, 'Blocked', trace.log.join(' | '));
      assert.equal(result.decision.blocked?.code, 'QuorumLost');
      const actions = sim.store.listEvents(NAME).slice(eventsBefore).filter((e) => e.action !== undefined);
      assert.deepEqual(actions, [], 'no action while quorum is lost');
      checker.checkWorld();
      checker.checkEventLog();
      assert.equal(sim.world.voterCount(NAME), replicas, 'no member was removed');
    }),
    { numRuns: runs },
  );
  return `majority kills: ${String(runs)} runs, all Blocked/QuorumLost with no action`;
}

export const PROPERTIES: Record<PropertyName, (runs: number) => Promise<string>> = {
  faults: faultsProperty,
  changes: changesProperty,
  races: racesProperty,
  majority: majorityProperty,
};

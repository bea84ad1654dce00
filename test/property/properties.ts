import assert from 'node:assert/strict';
import fc from 'fast-check';
import { quorum } from '../../src/domain/quorum.ts';
import { Simulation } from '../../src/sim/simulate.ts';
import { changeScenarioArb, faultScenarioArb, oddReplicas, raceScenarioArb } from './arbitraries.ts';
import { manifestFor, runScenario, type Scenario, type SpecInput } from './harness.ts';
import { assertConvergedInModel, InvariantChecker, NAME, type Trace } from './invariant-checker.ts';

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
 * Killing a majority of voters of a converged cluster (at least one survives). Nothing can be added or
 * removed without quorum, so fastplane starts the stopped members again from their data dirs:
 * - when their processes can start, the cluster comes back as it was: converged, the same member IDs,
 *   no membership change besides those starts, and still one cluster;
 * - when they never start again, the run ends Blocked with QuorumLost, having attempted nothing but
 *   those starts and removed no member.
 */
export async function majorityProperty(runs: number): Promise<string> {
  const arb = fc.record({
    seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
    replicas: oddReplicas.filter((n) => n >= 3),
    strategy: fc.constantFrom('parallel' as const, 'serial' as const),
    provisioningMs: fc.integer({ min: 0, max: 3000 }),
    extra: fc.nat({ max: 8 }),
    picks: fc.array(fc.nat({ max: 100 }), { minLength: 9, maxLength: 9 }),
    restartable: fc.boolean(),
  });
  let recovered = 0;
  await fc.assert(
    fc.asyncProperty(arb, async ({ seed, replicas, strategy, provisioningMs, extra, picks, restartable }) => {
      const spec = { ...BASE_SPEC, replicas, strategy, provisioning: { minMs: 0, maxMs: provisioningMs } };
      const sim = new Simulation(manifestFor(spec), { seed, blockedGraceMs: 15_000 });
      const trace: Trace = { log: [], passes: 0 };
      const checker = new InvariantChecker(sim, trace);
      const onPass = checker.onPass.bind(checker);
      assert.equal((await sim.run(3_600_000, onPass)).outcome, 'Converged');
      const membersBefore = sim.world.snapshot(NAME).members.map((m) => m.id).sort();
      // More than the cluster can lose, fewer than all.
      const tolerable = replicas - quorum(replicas);
      const kills = tolerable + 1 + (extra % (replicas - 1 - tolerable));
      const names = sim.world.snapshot(NAME).machines.map((m) => m.name);
      const victims: string[] = [];
      for (const pick of picks) {
        const remaining = names.filter((n) => !victims.includes(n));
        if (victims.length < kills) victims.push(remaining[pick % remaining.length]!);
      }
      for (const name of victims) {
        if (!restartable) sim.world.neverStart(name);
        sim.world.killMember(name);
      }
      trace.log.push(`killed ${victims.join(',')}${restartable ? '' : ' for good'}`);
      const eventsBefore = sim.store.inspect(NAME).events.length;
      const result = await sim.run(600_000, onPass);
      const actions = sim.store.inspect(NAME).events.slice(eventsBefore).filter((e) => e.action !== undefined);
      const isRestart = (e: (typeof actions)[number]): boolean => e.action === 'RestartMember' && e.machine !== undefined && victims.includes(e.machine);
      if (restartable) {
        // Until quorum is back, nothing but restarts; then a member still down is remediated as usual.
        const needed = kills - tolerable;
        assert.ok(actions.slice(0, needed).filter(isRestart).length === needed, `quorum is restored by restarts first | ${trace.log.join(' | ')}`);
        assert.equal(result.outcome, 'Converged', trace.log.join(' | '));
        const restarted = new Set(actions.slice(0, needed).map((e) => e.machine));
        const after = sim.world.snapshot(NAME).members;
        for (const m of sim.store.inspect(NAME).machines.filter((r) => restarted.has(r.name))) {
          assert.ok(m.memberId !== undefined && membersBefore.includes(m.memberId) && after.some((a) => a.id === m.memberId), `${m.name} came back as member ${String(m.memberId)}`);
        }
        assertConvergedInModel(sim, replicas, spec.version, trace.log.join(' | '));
        recovered++;
      } else {
        assert.ok(actions.every(isRestart), `only restarts while quorum is lost | ${trace.log.join(' | ')}`);
        assert.equal(result.outcome, 'Blocked', trace.log.join(' | '));
        assert.equal(result.decision.blocked?.code, 'QuorumLost');
        assert.equal(sim.world.voterCount(NAME), replicas, 'no member was removed');
      }
      assert.equal(sim.world.initCount, 1, 'never a second cluster');
      checker.checkWorld();
      checker.checkEventLog();
    }),
    { numRuns: runs },
  );
  return `majority kills: ${String(runs)} runs; ${String(recovered)} recovered by restarting the stopped members, the rest Blocked/QuorumLost with nothing but restarts attempted`;
}

export const PROPERTIES: Record<PropertyName, (runs: number) => Promise<string>> = {
  faults: faultsProperty,
  changes: changesProperty,
  races: racesProperty,
  majority: majorityProperty,
};

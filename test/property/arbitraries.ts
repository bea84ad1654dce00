import fc from 'fast-check';
import { FAILPOINTS } from '../../src/executor/failpoints.ts';
import type { Crash, Fault, Scenario, SpecChange, SpecInput } from './harness.ts';

/** Runs per property: at least 200 (FASTPLANE_PROPERTY_RUNS raises it for a soak). */
export const RUNS = Math.max(200, Number(process.env.FASTPLANE_PROPERTY_RUNS ?? 200));

/** 1..9 odd; 3 and 5 (the common sizes) twice as often, so 200 runs stay within the time budget. */
export const oddReplicas = fc.constantFrom(1, 3, 3, 5, 5, 7, 9);

/**
 * Provisioning from instant to 45 s, fixed or spread: below and above the 5 s rule, unhealthyAfter and
 * the stuck-learner timeout, which is what matters to the ordering of events. Longer times would only
 * add idle polls.
 */
export const provisioningArb = fc
  .tuple(fc.integer({ min: 0, max: 30_000 }), fc.integer({ min: 0, max: 15_000 }))
  .map(([minMs, spread]) => ({ minMs, maxMs: minMs + spread }));

export const specArb: fc.Arbitrary<SpecInput> = fc.record({
  replicas: oddReplicas,
  version: fc.constant('3.4.23'),
  strategy: fc.constantFrom('parallel' as const, 'serial' as const),
  maxSurge: fc.integer({ min: 0, max: 2 }),
  failureDomains: fc.subarray(['az-a', 'az-b', 'az-c']),
  provisioning: provisioningArb,
  maxConcurrentProvisioning: fc.integer({ min: 1, max: 10 }),
  // The default 2 min now and then; shorter mostly, since a stuck learner is polled every 100 ms.
  learnerStuckAfterMs: fc.constantFrom(15_000, 15_000, 30_000, 120_000),
  unhealthyAfterMs: fc.constantFrom(5_000, 10_000),
  // Half the runs with etcd's own checks off in the model: then only the planner's guard keeps
  // invariants 3-6 (the model flags any unsafe change it is asked to apply).
  reconfigurationCheck: fc.constantFrom('etcd' as const, 'fastplane' as const),
});

const faultKindArb = fc.constantFrom('failProvisioning' as const, 'killMember' as const, 'neverStart' as const, 'stallLearner' as const, 'staleLeader' as const);

export const triggerArb = fc.constantFrom(
  'RequestMachineDeletion' as const,
  'CreateMachine' as const,
  'InitCluster' as const,
  'AddLearner' as const,
  'PromoteLearner' as const,
  'RemoveMember' as const,
  'MoveLeader' as const,
);

/** A fault at a random time, or (half the time) lying in wait for a decision of some kind. */
export const faultArb: fc.Arbitrary<Fault> = fc
  .record({
    atMs: fc.integer({ min: 0, max: 150_000 }),
    kind: faultKindArb,
    pick: fc.nat({ max: 8 }),
    trigger: fc.option(triggerArb, { nil: undefined, freq: 2 }),
  })
  .map(({ trigger, ...fault }) => (trigger === undefined ? fault : { ...fault, trigger }));

export const crashArb: fc.Arbitrary<Crash> = fc.record({
  failpoint: fc.constantFrom(...FAILPOINTS),
  hit: fc.integer({ min: 1, max: 3 }),
});

export const changeArb: fc.Arbitrary<SpecChange> = fc.record({
  atMs: fc.integer({ min: 0, max: 200_000 }),
  replicas: oddReplicas,
  upgrade: fc.boolean(),
});

/** Random spec, up to four faults and two controller crashes, sometimes with call latency. */
export const faultScenarioArb: fc.Arbitrary<Scenario> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  spec: specArb,
  faults: fc.array(faultArb, { maxLength: 4 }),
  crashes: fc.array(crashArb, { maxLength: 2 }),
  changes: fc.constant([]),
  latencyMs: fc.constantFrom(0, 0, 30),
});

/** Random spec and one to three spec changes (scale, upgrade), with faults and controller crashes. */
export const changeScenarioArb: fc.Arbitrary<Scenario> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  spec: specArb,
  faults: fc.array(faultArb, { maxLength: 3 }),
  crashes: fc.array(crashArb, { maxLength: 2 }),
  changes: fc.array(changeArb, { minLength: 1, maxLength: 3 }),
  latencyMs: fc.constantFrom(0, 0, 30),
});

/**
 * Membership changes racing member crashes: a cluster converges (fast provisioning), then at 60 s its
 * spec changes (scale down, up or upgrade) and one to three crashes lie in wait for the decisions that
 * follow (victim chosen, leader moved, member removed or promoted), so they land between a decision
 * and its execution or just before the next observation. This is where quorum checks earn their keep.
 * Some are leadership moves instead, with one voter still naming the old leader for a while: the
 * leader rule before a removal earns its keep there (the model flags removing its true leader).
 */
export const raceScenarioArb: fc.Arbitrary<Scenario> = fc
  .record({
    seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
    replicas: fc.constantFrom(3, 3, 5, 5, 7, 9),
    strategy: fc.constantFrom('parallel' as const, 'serial' as const),
    maxSurge: fc.integer({ min: 0, max: 2 }),
    to: oddReplicas,
    upgrade: fc.boolean(),
    kills: fc.array(
      fc.record({
        // Mostly crashes; now and then leadership moves while a voter still names the old leader.
        kind: fc.constantFrom('killMember' as const, 'killMember' as const, 'staleLeader' as const),
        trigger: fc.constantFrom('RequestMachineDeletion' as const, 'RemoveMember' as const, 'MoveLeader' as const, 'PromoteLearner' as const, 'AddLearner' as const),
        pick: fc.nat({ max: 8 }),
        delayMs: fc.integer({ min: 0, max: 20_000 }),
      }),
      { minLength: 1, maxLength: 3 },
    ),
    crashes: fc.array(crashArb, { maxLength: 1 }),
    reconfigurationCheck: fc.constantFrom('etcd' as const, 'fastplane' as const),
  })
  .map(({ seed, replicas, strategy, maxSurge, to, upgrade, kills, crashes, reconfigurationCheck }) => ({
    seed,
    spec: {
      replicas,
      version: '3.4.23',
      strategy,
      maxSurge,
      failureDomains: [],
      provisioning: { minMs: 0, maxMs: 2000 },
      maxConcurrentProvisioning: 10,
      learnerStuckAfterMs: 30_000,
      unhealthyAfterMs: 10_000,
      reconfigurationCheck,
    },
    faults: kills.map(({ kind, trigger, pick, delayMs }) => ({ atMs: 60_000 + delayMs, kind, pick, trigger })),
    crashes,
    changes: [{ atMs: 60_000, replicas: to, upgrade }],
    latencyMs: 0,
  }));

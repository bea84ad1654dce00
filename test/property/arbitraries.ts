import fc from 'fast-check';
import { FAILPOINTS } from '../../src/executor/failpoints.ts';
import type { Crash, Fault, Scenario, SpecChange, SpecInput } from './harness.ts';

/** Runs per property: at least 200 (FASTPLANE_PROPERTY_RUNS raises it for a soak). */
export const RUNS = Math.max(200, Number(process.env.FASTPLANE_PROPERTY_RUNS ?? 200));

export const oddReplicas = fc.constantFrom(1, 3, 5, 7, 9);

/** Provisioning from instant to a minute, fixed or spread. */
export const provisioningArb = fc
  .tuple(fc.integer({ min: 0, max: 40_000 }), fc.integer({ min: 0, max: 20_000 }))
  .map(([minMs, spread]) => ({ minMs, maxMs: minMs + spread }));

export const specArb: fc.Arbitrary<SpecInput> = fc.record({
  replicas: oddReplicas,
  version: fc.constant('3.4.23'),
  strategy: fc.constantFrom('parallel' as const, 'serial' as const),
  maxSurge: fc.integer({ min: 0, max: 2 }),
  failureDomains: fc.subarray(['az-a', 'az-b', 'az-c']),
  provisioning: provisioningArb,
  maxConcurrentProvisioning: fc.integer({ min: 1, max: 10 }),
});

export const faultArb: fc.Arbitrary<Fault> = fc.record({
  atMs: fc.integer({ min: 0, max: 150_000 }),
  kind: fc.constantFrom('failProvisioning' as const, 'killMember' as const, 'neverStart' as const, 'stallLearner' as const),
  pick: fc.nat({ max: 8 }),
});

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

/** Random spec and one to three spec changes (scale, upgrade), with controller crashes. */
export const changeScenarioArb: fc.Arbitrary<Scenario> = fc.record({
  seed: fc.integer({ min: 1, max: 2 ** 31 - 1 }),
  spec: specArb,
  faults: fc.constant([]),
  crashes: fc.array(crashArb, { maxLength: 2 }),
  changes: fc.array(changeArb, { minLength: 1, maxLength: 3 }),
  latencyMs: fc.constantFrom(0, 0, 30),
});

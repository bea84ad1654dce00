import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NETWORK_SCENARIOS } from './network-scenarios.ts';
import { GUARDED_IN_SUITE, runScenario, SCENARIOS, type ReconfigurationMode } from './scenarios.ts';

// Every scenario with etcd's own reconfiguration checks; then, in guarded mode (reconfigurationCheck:
// fastplane, etcd's checks off), only GUARDED_IN_SUITE: the leader killed during a promotion, two of
// five voters killed, a voter frozen during a scale-up. `npm run chaos` runs all of them in both modes.
// The network scenarios (on the lab of network namespaces) run in etcd's mode.
const RUNS: { scenario: (typeof SCENARIOS)[number]; mode: ReconfigurationMode }[] = [
  ...[...SCENARIOS, ...NETWORK_SCENARIOS].map((scenario) => ({ scenario, mode: 'etcd' as const })),
  ...SCENARIOS.filter((s) => GUARDED_IN_SUITE.has(s.name)).map((scenario) => ({ scenario, mode: 'fastplane' as const })),
];

describe('chaos on real etcd, with a writer that counts', { timeout: 1_200_000 }, () => {
  for (const { scenario, mode } of RUNS) {
    test(mode === 'etcd' ? scenario.name : `${scenario.name} (guarded: fastplane's checks, etcd's off)`, { timeout: 180_000 }, async () => {
      const result = await runScenario(scenario, mode);
      const { detail, ...summary } = result;
      console.log(JSON.stringify(summary));
      if (!result.expectationMet || result.converged !== scenario.converges) console.log(detail);
      assert.equal(result.ackedButLost, 0, 'every acknowledged write is readable afterwards');
      assert.equal(result.converged, scenario.converges, scenario.converges ? 'converged' : 'a safety gate held instead of converging');
      assert.ok(result.expectationMet, scenario.expectation);
      if (scenario.spec) assert.ok(result.writesAcked > 0, 'the writer made progress');
    });
  }
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NETWORK_SCENARIOS } from './network-scenarios.ts';
import { runScenario, SCENARIOS } from './scenarios.ts';

describe('chaos on real etcd, with a writer that counts', { timeout: 1_200_000 }, () => {
  for (const scenario of [...SCENARIOS, ...NETWORK_SCENARIOS]) {
    test(scenario.name, { timeout: 180_000 }, async () => {
      const result = await runScenario(scenario);
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

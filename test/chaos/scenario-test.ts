import assert from 'node:assert/strict';
import { test } from 'node:test';
import { runScenario, type ChaosScenario, type ReconfigurationMode } from './scenario-run.ts';

/** One node:test test per scenario run: every acknowledged write readable, convergence as expected. */
export function scenarioTest(scenario: ChaosScenario, mode: ReconfigurationMode): void {
  test(mode === 'etcd' ? scenario.name : `${scenario.name} (guarded: fastplane's checks, etcd's off)`, { timeout: 240_000 }, async () => {
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

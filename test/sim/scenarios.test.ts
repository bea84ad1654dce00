import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateControlPlane } from '../../src/api/control-plane.ts';
import { parseDuration } from '../../src/api/duration.ts';
import { compareScenarios, rolloutTarget, scenarioTime } from '../../src/sim/scenarios.ts';

/** The scenarios behind `simulate -f`, on the model in virtual time at 8-12 minutes of provisioning. */

const PROVISIONING = { minMs: 8 * 60_000, maxMs: 12 * 60_000 };
const HOURS = 12 * 3_600_000;

function manifest(strategy: 'parallel' | 'serial', maxSurge = 1) {
  return validateControlPlane({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name: 'kcp' }, spec: { replicas: 3, version: '3.5.16', scaleUp: { strategy }, rollout: { maxSurge } } });
}

test('bring-up: KCP order provisions one machine after another, fastplane all at once', async () => {
  for (const seed of [1, 2, 3]) {
    const serial = await scenarioTime('bring-up', manifest('serial'), PROVISIONING, seed, HOURS);
    const parallel = await scenarioTime('bring-up', manifest('parallel'), PROVISIONING, seed, HOURS);
    assert.ok(serial !== undefined && parallel !== undefined);
    assert.ok(serial >= 3 * PROVISIONING.minMs, `serial pays three provisionings, took ${String(serial)} ms`);
    assert.ok(parallel < PROVISIONING.maxMs + 60_000, `parallel pays about one, took ${String(parallel)} ms`);
  }
});

test('rollout: with maxSurge 1 both orders replace one member at a time; a wider surge replaces them at once', async () => {
  const serial = await scenarioTime('rollout', manifest('serial'), PROVISIONING, 7, HOURS);
  const parallel = await scenarioTime('rollout', manifest('parallel'), PROVISIONING, 7, HOURS);
  const wide = await scenarioTime('wide-rollout', manifest('parallel', 3), PROVISIONING, 7, HOURS);
  assert.ok(serial !== undefined && parallel !== undefined && wide !== undefined);
  assert.ok(parallel >= 3 * PROVISIONING.minMs, 'three surge machines, one after another');
  // Each order pays three provisionings one after another, whatever they draw (times differ by the draws).
  for (const [order, ms] of [['serial', serial], ['parallel', parallel]] as const) {
    assert.ok(ms >= 3 * PROVISIONING.minMs && ms <= 3 * PROVISIONING.maxMs + 180_000, `maxSurge 1, ${order}: three provisionings in a row, took ${String(ms)} ms`);
  }
  assert.ok(wide < PROVISIONING.maxMs + 60_000, `maxSurge 3 provisions every replacement at once, took ${String(wide)} ms`);
  assert.equal(rolloutTarget('3.5.16'), '3.5.17');
});

test('remediation of a failed voter: noticed after unhealthyAfter, then one replacement provisions and joins', async () => {
  const unhealthyAfter = parseDuration(manifest('parallel').spec.remediation.unhealthyAfter)!;
  for (const strategy of ['serial', 'parallel'] as const) {
    const ms = await scenarioTime('remediation', manifest(strategy), PROVISIONING, 3, HOURS);
    assert.ok(ms !== undefined, `${strategy} converged again`);
    assert.ok(ms >= unhealthyAfter + PROVISIONING.minMs && ms < unhealthyAfter + PROVISIONING.maxMs + 60_000, `${strategy}: ${String(ms)} ms`);
  }
});

test('compareScenarios: percentiles per scenario and order over every run', async () => {
  const result = await compareScenarios({ base: manifest('parallel'), provisioning: PROVISIONING, runs: 4, seed: 11 });
  assert.deepEqual(result.map((r) => r.scenario), ['bring-up', 'rollout', 'wide-rollout', 'remediation']);
  for (const r of result) {
    assert.equal(r.serial.converged, 4, r.scenario);
    assert.equal(r.parallel.converged, 4, r.scenario);
    assert.ok(r.parallel.p50 <= r.parallel.p90 && r.parallel.p90 <= r.parallel.p99);
    assert.equal(r.speedup, r.serial.p50 / r.parallel.p50);
  }
  assert.ok(result[0]!.speedup > 2, 'bring-up of 3 at 8-12 min is more than twice as fast in parallel');
  assert.match(result[2]!.description, /maxSurge 3/);
});

import assert from 'node:assert/strict';
import type { BenchResult } from '../../src/bench/result.ts';
import type { CliRun } from './cli.ts';

/**
 * A bench's printed result, checked for what holds on any machine. Whether a run stays within its
 * bound is a timing, and a test on a shared machine cannot promise one (another test's load during
 * the calibration makes a later run beat it): what must hold is that a run ahead of its bound, at
 * the end or at any milestone, is a model error, and a model error exits 1 naming it, its result
 * printed all the same. The bound itself is judged by benchmarks on a quiet machine.
 */
export function benchResultOf(bench: CliRun): BenchResult {
  assert.ok(bench.stdout.trim() !== '', `bench printed no result (exit ${String(bench.code)}): ${bench.stderr}`);
  const result = JSON.parse(bench.stdout) as BenchResult;
  const runs = result.runs.flatMap((r) => result.settings.modes.flatMap((mode) => r[mode] ?? []));
  for (const run of runs) {
    assert.equal(run.modelError, run.milestonesAhead.length > 0 || run.boundSeconds > run.seconds, `${run.cluster}: a model error is a milestone or the end ahead of the bound`);
    for (const m of run.milestonesAhead) assert.ok(m.observedSeconds < m.boundSeconds, `${run.cluster}: ${m.milestone} is listed ahead of its bound`);
  }
  assert.equal(result.modelErrors, runs.filter((r) => r.modelError).length);
  assert.equal(bench.code, result.modelErrors === 0 ? 0 : 1, bench.stderr);
  for (const run of runs.filter((r) => r.modelError)) assert.match(bench.stderr, new RegExp(`MODEL ERROR: .*${run.cluster}:`));
  return result;
}

import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BenchMachine, BenchRun, Strategy, StrategyRun } from '../../src/bench/result.ts';
import { figures, modeFigures } from '../../src/bench/runner.ts';

/** A strategy run with only what the mode figures read; latencies one per join. */
function run(strategy: Strategy, seconds: number, boundSeconds: number, refusals: number, latencies: (number | null)[], joinPhaseSeconds: number | null = null): StrategyRun {
  const machines = latencies.map((l, i) => ({ name: `m-${String(i)}`, promotionLatencySeconds: l }) as BenchMachine);
  return { strategy, cluster: `c-${strategy}`, seconds, boundSeconds, efficiency: boundSeconds / seconds, refusals, machines, joinPhaseSeconds } as StrategyRun;
}

const runs: BenchRun[] = [
  { run: 1, order: ['serial', 'parallel', 'guarded'], serial: run('serial', 150, 149, 0, [0.1]), parallel: run('parallel', 48, 45, 30, [0.2, 0.05], 20), guarded: run('guarded', 33, 31, 0, [0.03, 0.4], 10), speedup: null, efficiency: null },
  { run: 2, order: ['guarded', 'parallel', 'serial'], serial: run('serial', 160, 149, 0, [0.1]), parallel: run('parallel', 50, 45, 40, [null], 22), guarded: run('guarded', 35, 31, 0, [0.06], 12), speedup: null, efficiency: null },
  { run: 3, order: ['serial', 'parallel', 'guarded'], serial: run('serial', 155, 149, 0, [0.1]), parallel: run('parallel', 49, 46, 35, [0.1], 21), guarded: run('guarded', 34, 32, 2, [0.05], 11), speedup: null, efficiency: null },
];

test('each mode: medians over runs, speedup against serial, latency median and max over every join', () => {
  const guarded = modeFigures(runs, 'guarded');
  assert.deepEqual(guarded, {
    seconds: 34,
    boundSeconds: 31,
    efficiency: Math.round((31 / 34) * 1000) / 1000,
    speedup: Math.round((155 / 34) * 1000) / 1000,
    joinPhaseSeconds: 11,
    // Against one learner at a time (parallel): 49 s and a 21 s join phase, medians.
    overOneAtATime: { speedup: Math.round((49 / 34) * 1000) / 1000, joinPhaseSpeedup: Math.round((21 / 11) * 1000) / 1000 },
    refusals: 0,
    // 0.03, 0.4, 0.06, 0.05: the median of four is the mean of the middle two.
    promotionLatency: { medianSeconds: 0.055, maxSeconds: 0.4 },
  });
  assert.deepEqual(Object.keys(modeFigures(runs, 'parallel') ?? {}).sort(), ['boundSeconds', 'efficiency', 'joinPhaseSeconds', 'overOneAtATime', 'promotionLatency', 'refusals', 'seconds', 'speedup']);
  assert.equal(modeFigures(runs, 'parallel')?.refusals, 35);
  assert.equal(modeFigures(runs, 'serial')?.speedup, 1);
  // Without serial there is nothing to compare against.
  const without = (mode: Strategy): BenchRun[] =>
    runs.map((r) => {
      const { serial, parallel, guarded: g, ...rest } = r;
      const kept: Partial<Record<Strategy, StrategyRun | undefined>> = { serial, parallel, guarded: g };
      const copy: BenchRun = { ...rest };
      for (const m of ['serial', 'parallel', 'guarded'] as const) {
        const value = kept[m];
        if (m !== mode && value !== undefined) copy[m] = value;
      }
      return copy;
    });
  const noSerial = without('serial');
  assert.equal(modeFigures(noSerial, 'guarded')?.speedup, null);
  assert.equal(modeFigures(without('parallel'), 'guarded')?.overOneAtATime, null);
  // Serial has no joins recorded here: no join phase to compare.
  assert.equal(modeFigures(runs, 'serial')?.joinPhaseSeconds, null);
  assert.equal(modeFigures(without('guarded'), 'guarded'), undefined);
});

test("the top-level fields stay serial against parallel; guarded shows only under modes", () => {
  const must = (mode: Strategy) => {
    const f = modeFigures(runs, mode);
    assert.ok(f);
    return f;
  };
  const modes = { serial: must('serial'), parallel: must('parallel'), guarded: must('guarded') };
  const top = figures(modes);
  assert.equal(top.serialSeconds, 155);
  assert.equal(top.parallelSeconds, 49);
  assert.equal(top.boundSeconds, 45);
  assert.equal(top.speedup, modes.parallel.speedup);
  assert.deepEqual(top.promotionLatencySeconds, { serial: 0.1, parallel: 0.1 });
  const onlyGuarded = figures({ guarded: modes.guarded });
  assert.equal(onlyGuarded.serialSeconds, null);
  assert.equal(onlyGuarded.parallelSeconds, null);
});

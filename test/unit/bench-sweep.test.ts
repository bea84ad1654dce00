import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { BenchResult, StrategyRun } from '../../src/bench/result.ts';
import { summarizeCell, sweepCells, type SweepCellSummary } from '../../src/bench/sweep.ts';
import { renderSweepSvg } from '../../src/report/sweep-svg.ts';

test('a sweep has a cell per combination, rates outermost, in the order given', () => {
  const cells = sweepCells(['100mbit', 'unlimited'], [0, 64], ['5s', '30s']);
  assert.equal(cells.length, 8);
  assert.deepEqual(cells[0], { hostBandwidth: '100mbit', keyspaceBytes: 0, provisioningDelay: '5s' });
  assert.deepEqual(cells[3], { hostBandwidth: '100mbit', keyspaceBytes: 64, provisioningDelay: '30s' });
  assert.deepEqual(cells[7], { hostBandwidth: 'unlimited', keyspaceBytes: 64, provisioningDelay: '30s' });
});

test("a cell's summary quotes its bench's medians and gains, and every run's load", () => {
  const run = (load: number): StrategyRun => ({ loadAverage: [load, 1, 1] }) as StrategyRun;
  const result = {
    startedAt: '2026-12-06T21:00:00.000Z',
    settings: { modes: ['parallel', 'learners'] },
    modes: {
      parallel: { seconds: 40, speedup: null, overOneAtATime: { speedup: 1, joinPhaseSpeedup: 1 } },
      learners: { seconds: 32, speedup: null, overOneAtATime: { speedup: 1.25, joinPhaseSpeedup: 1.6 } },
    },
    runs: [
      { run: 1, parallel: run(2), learners: run(3) },
      { run: 2, learners: run(4), parallel: run(5) },
    ],
    modelErrors: 0,
  } as unknown as BenchResult;
  const cell = { hostBandwidth: '1gbit', keyspaceBytes: 64, provisioningDelay: '5s' };
  const summary = summarizeCell(cell, result, 'cell-1.json');
  assert.deepEqual(summary.seconds, { parallel: 40, learners: 32 });
  assert.equal(summary.learnersOverSerial, null, 'serial did not run');
  assert.equal(summary.learnersOverOneAtATime, 1.25);
  assert.equal(summary.learnersJoinPhaseOverOneAtATime, 1.6);
  assert.deepEqual(
    summary.loadAverages.map((l) => l[0]),
    [2, 3, 5, 4],
    'in run order, each run in the order of --modes',
  );
  assert.equal(summary.file, 'cell-1.json');
});

test("the report's sweep chart has a group per cell and a bar per gain, at the gain the summary quotes", () => {
  const cell = (hostBandwidth: string, learnersOverSerial: number | null, learnersOverOneAtATime: number | null, modelErrors = 0): SweepCellSummary => ({
    hostBandwidth,
    keyspaceBytes: 32 * 1024 ** 2,
    provisioningDelay: '5s',
    file: `${hostBandwidth}.json`,
    startedAt: '2026-12-06T21:00:00.000Z',
    loadAverages: [],
    seconds: {},
    learnersOverSerial,
    learnersOverOneAtATime,
    learnersJoinPhaseOverOneAtATime: null,
    modelErrors,
  });
  const svg = renderSweepSvg({ kind: 'fastplane-bench-sweep', startedAt: 'a', finishedAt: 'b', cells: [cell('100mbit', 1.3, 1.04), cell('unlimited', 2.5, null, 1)] });
  assert.equal(svg.match(/<g class="cell"/g)?.length, 2);
  assert.equal(svg.match(/<rect class="gain"/g)?.length, 3, 'no bar where the gain is unknown');
  assert.match(svg, /learners vs one at a time: 1\.040×/);
  assert.match(svg, /unlimited, 32 MiB, 5s \(model error\)/);
  // Bars scale to the largest gain: 2.5× is the full width, 1.3× about half of it.
  const width = (series: string, n: number): number => Number([...svg.matchAll(new RegExp(`data-series="${series}" x="\\d+" y="\\d+" width="([\\d.]+)"`, 'g'))][n]?.[1]);
  assert.ok(Math.abs(width('learnersOverSerial', 0) / width('learnersOverSerial', 1) - 1.3 / 2.5) < 0.01);
});

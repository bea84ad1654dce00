import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { InvalidInputError } from '../../api/errors.ts';
import type { BenchOptions } from '../../bench/runner.ts';
import { finishedCells, inCellOrder, summarizeCell, sweepCells, type SweepCellSummary, type SweepSummary } from '../../bench/sweep.ts';
import { EXIT } from '../exit-codes.ts';
import type { CliContext } from '../context.ts';
import { benchOnce, givenCalibration, parseBenchFlags, parseSize, type BenchFlags } from './bench.ts';

/**
 * `bench --sweep`: a bench per cell of link rate x keyspace x provisioning, one after another (the
 * cells share this host, so they never overlap), each cell's JSON written as it finishes and the
 * summary after each cell, under `<state dir>/bench/sweep-<start>/`. A sweep takes hours: `--resume
 * DIR` goes on with one cut short, running only the cells it had not finished.
 */

const list = (text: string | undefined, fallback: string): string[] => (text ?? fallback).split(',').map((v) => v.trim());

export async function benchSweep(ctx: CliContext, flags: BenchFlags): Promise<number> {
  const rates = list(flags.hostBandwidth, 'unlimited');
  const sizes = list(flags.keyspace ?? flags.preload, '0');
  const keyspaces = sizes.map((text) => parseSize(text) ?? NaN);
  const bad = sizes.filter((_, i) => Number.isNaN(keyspaces[i]));
  if (bad.length > 0) throw new InvalidInputError([`--keyspace: must be sizes such as 0,64MiB,256MiB, got ${bad.join(',')}`]);
  const cells = sweepCells(rates, keyspaces, list(flags.provisioningDelay, '30s'));
  // Every cell's flags checked before the first cell runs.
  // Each cell gets its own single keyspace below.
  const common: BenchFlags = { ...flags };
  delete common.keyspace;
  delete common.preload;
  delete common.resume;
  const optionsOf = cells.map((cell): BenchOptions & { output: 'json' | 'table' } =>
    parseBenchFlags({
      ...common,
      sweep: false,
      hostBandwidth: cell.hostBandwidth,
      ...(cell.keyspaceBytes === 0 ? {} : { keyspace: String(cell.keyspaceBytes) }),
      // A keyspace is always restored by the first member (--method is not swept), so it crosses that host's link inside the run.
      method: cell.keyspaceBytes === 0 ? 'scale-up' : 'restore',
      provisioningDelay: cell.provisioningDelay,
    }),
  );
  const resumed = flags.resume === undefined ? undefined : finishedCells(resolve(flags.resume), cells);
  if (resumed !== undefined && 'problems' in resumed) throw new InvalidInputError(resumed.problems);
  const startedAt = resumed?.startedAt ?? new Date().toISOString();
  const dir = flags.resume === undefined ? join(ctx.stateDir, 'bench', `sweep-${startedAt.replace(/[:.]/g, '-')}`) : resolve(flags.resume);
  mkdirSync(dir, { recursive: true });
  let summaries: SweepCellSummary[] = resumed?.done ?? [];
  for (const [i, cell] of cells.entries()) {
    const where = `bench: sweep cell ${String(i + 1)}/${String(cells.length)}: ${cell.hostBandwidth}, keyspace ${String(cell.keyspaceBytes)} bytes, provisioning ${cell.provisioningDelay}`;
    if (inCellOrder([cell], summaries).length > 0) {
      process.stderr.write(`${where}: finished before, kept\n`);
      continue;
    }
    process.stderr.write(`${where}\n`);
    const options = optionsOf[i];
    if (options === undefined) continue;
    const result = await benchOnce(ctx, { ...options, ...givenCalibration(ctx) });
    if (typeof result === 'number') return result;
    const file = `cell-${String(i + 1)}-${cell.hostBandwidth}-${String(cell.keyspaceBytes)}b-${cell.provisioningDelay}.json`;
    writeFileSync(join(dir, file), `${JSON.stringify(result, null, 2)}\n`);
    summaries = inCellOrder(cells, [...summaries, summarizeCell(cell, result, file)]);
    // Rewritten after every cell, so a sweep cut short keeps the map of the cells it finished.
    writeFileSync(join(dir, 'summary.json'), `${JSON.stringify({ kind: 'fastplane-bench-sweep', startedAt, finishedAt: new Date().toISOString(), cells: summaries } satisfies SweepSummary, null, 2)}\n`);
  }
  const summary: SweepSummary = { kind: 'fastplane-bench-sweep', startedAt, finishedAt: new Date().toISOString(), cells: summaries };
  process.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  process.stderr.write(`bench: sweep saved to ${dir}\n`);
  const errors = summaries.filter((c) => c.modelErrors > 0);
  if (errors.length > 0) {
    process.stderr.write(`error: bench: ${String(errors.length)} cell(s) with a run ahead of its bound: ${errors.map((c) => c.file).join(', ')}\n`);
    return EXIT.internal;
  }
  return EXIT.converged;
}

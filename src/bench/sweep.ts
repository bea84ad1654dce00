import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchResult, Strategy } from './result.ts';

/**
 * A sweep's summary: one line per cell (link rate, keyspace, provisioning), each quoting its own
 * bench JSON, so the map of where parallel learners help reads from measured figures only.
 */

export interface SweepCell {
  /** Each host's link (`unlimited`: the lab with no limit). */
  hostBandwidth: string;
  /** 0: no keyspace. */
  keyspaceBytes: number;
  provisioningDelay: string;
}

export interface SweepCellSummary extends SweepCell {
  /** The cell's bench JSON, beside the summary. */
  file: string;
  startedAt: string;
  /** Each run's load average (1, 5, 15 min) when it ended, in run order: the lab's CPU and disk are shared. */
  loadAverages: number[][];
  /** Median seconds per mode. */
  seconds: Partial<Record<Strategy, number>>;
  /** Parallel learners (`learners`) against serial (KCP's order), and against one learner at a time (`parallel`). */
  learnersOverSerial: number | null;
  learnersOverOneAtATime: number | null;
  learnersJoinPhaseOverOneAtATime: number | null;
  /** Runs ahead of their bound, at the end or at a milestone: a cell with any is not a measurement. */
  modelErrors: number;
}

export interface SweepSummary {
  kind: 'fastplane-bench-sweep';
  startedAt: string;
  finishedAt: string;
  cells: SweepCellSummary[];
}

/** Every combination, rates outermost, in the order given. */
export function sweepCells(rates: readonly string[], keyspaces: readonly number[], delays: readonly string[]): SweepCell[] {
  return rates.flatMap((hostBandwidth) => keyspaces.flatMap((keyspaceBytes) => delays.map((provisioningDelay) => ({ hostBandwidth, keyspaceBytes, provisioningDelay }))));
}

export function summarizeCell(cell: SweepCell, result: BenchResult, file: string): SweepCellSummary {
  const seconds: SweepCellSummary['seconds'] = {};
  for (const [mode, figures] of Object.entries(result.modes) as [Strategy, { seconds: number }][]) seconds[mode] = figures.seconds;
  const learners = result.modes.learners;
  return {
    ...cell,
    file,
    startedAt: result.startedAt,
    loadAverages: result.runs.flatMap((r) =>
      result.settings.modes.flatMap((mode) => {
        const run = r[mode];
        return run === undefined ? [] : [run.loadAverage];
      }),
    ),
    seconds,
    learnersOverSerial: learners?.speedup ?? null,
    learnersOverOneAtATime: learners?.overOneAtATime?.speedup ?? null,
    learnersJoinPhaseOverOneAtATime: learners?.overOneAtATime?.joinPhaseSpeedup ?? null,
    modelErrors: result.modelErrors,
  };
}

const sameCell = (a: SweepCell, b: SweepCell): boolean => a.hostBandwidth === b.hostBandwidth && a.keyspaceBytes === b.keyspaceBytes && a.provisioningDelay === b.provisioningDelay;

/**
 * A sweep cut short, read back so it can go on: the cells it finished, each still one of `cells` with
 * its JSON beside the summary; or what keeps it from being resumed with these cells.
 */
export function finishedCells(dir: string, cells: readonly SweepCell[]): { startedAt: string; done: SweepCellSummary[] } | { problems: string[] } {
  const file = join(dir, 'summary.json');
  if (!existsSync(file)) return { problems: [`--resume: ${dir} holds no sweep summary (summary.json)`] };
  let parsed: Partial<SweepSummary>;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<SweepSummary>;
  } catch (error) {
    return { problems: [`--resume: ${file} is not JSON: ${error instanceof Error ? error.message : String(error)}`] };
  }
  if (parsed.kind !== 'fastplane-bench-sweep' || parsed.startedAt === undefined || !Array.isArray(parsed.cells)) return { problems: [`--resume: ${file} is not a sweep summary`] };
  const problems = parsed.cells.flatMap((done) => {
    const name = `${done.hostBandwidth}, keyspace ${String(done.keyspaceBytes)} bytes, provisioning ${done.provisioningDelay}`;
    if (!cells.some((cell) => sameCell(cell, done))) return [`--resume: ${dir} has the cell ${name}, which these flags do not make: give the flags it was started with`];
    return existsSync(join(dir, done.file)) ? [] : [`--resume: the cell ${name} has no ${done.file} in ${dir}`];
  });
  return problems.length > 0 ? { problems } : { startedAt: parsed.startedAt, done: parsed.cells };
}

/** The summary of `done` for each of `cells` that has one, in the cells' order. */
export function inCellOrder(cells: readonly SweepCell[], done: readonly SweepCellSummary[]): SweepCellSummary[] {
  return cells.flatMap((cell) => done.filter((d) => sameCell(cell, d)).slice(0, 1));
}

/** The last sweep's summary under `<state dir>/bench/` (the newest `sweep-*` with one), or undefined. */
export function loadLatestSweep(stateDir: string): SweepSummary | undefined {
  const dir = join(stateDir, 'bench');
  if (!existsSync(dir)) return undefined;
  const newest = readdirSync(dir)
    .filter((name) => name.startsWith('sweep-') && existsSync(join(dir, name, 'summary.json')))
    .sort()
    .at(-1);
  if (newest === undefined) return undefined;
  const parsed = JSON.parse(readFileSync(join(dir, newest, 'summary.json'), 'utf8')) as { kind?: unknown };
  return parsed.kind === 'fastplane-bench-sweep' ? (parsed as SweepSummary) : undefined;
}

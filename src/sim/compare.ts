import { API_VERSION, KIND, validateControlPlane, type ControlPlane } from '../api/control-plane.ts';
import type { DurationRange } from '../api/duration.ts';
import type { ModelTimings } from './model-timings.ts';
import { Simulation } from './simulate.ts';

/**
 * Parallel against serial scale-up on the model, in virtual time: what backs `fastplane simulate`.
 * Every run builds a fresh Simulation (model etcd with the measured timings, the real reconciler) and
 * takes the virtual time from the first pass to convergence. Run i of both strategies uses the same
 * seed. No output here: callers render the numbers.
 */

export type Strategy = 'parallel' | 'serial';

export interface CompareOptions {
  replicas: number;
  /** Provisioning delay of each machine, drawn uniformly from the range. */
  provisioning: DurationRange;
  /** Runs per strategy. */
  runs: number;
  seed: number;
  /** Starting point for the manifest (name, version, failure domains ...); replicas and strategy are overridden. */
  base?: ControlPlane;
  /** Other model timings (catch-up, 5 s rule, election); the measured ones by default. */
  timings?: Partial<ModelTimings>;
  /** Virtual time a run may take before it counts as not converged (default 6 h). */
  timeoutMs?: number;
  /** Called after every run, for progress display. */
  onRun?: (run: { strategy: Strategy; index: number; ms: number | undefined }) => void;
}

export interface StrategyStats {
  strategy: Strategy;
  runs: number;
  /** Runs that converged within the timeout; the statistics cover these. */
  converged: number;
  /** Virtual milliseconds to ready (nearest-rank percentiles); NaN when no run converged. */
  p50: number;
  p90: number;
  p99: number;
  min: number;
  max: number;
  mean: number;
  /** Every converged run's time to ready, ascending. */
  samplesMs: number[];
}

export interface StrategyComparison {
  replicas: number;
  provisioning: DurationRange;
  runs: number;
  seed: number;
  parallel: StrategyStats;
  serial: StrategyStats;
  /** serial p50 / parallel p50. */
  speedup: number;
}

/** The nearest-rank percentile of ascending samples; NaN for none. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.min(sorted.length, Math.max(1, Math.ceil((p / 100) * sorted.length)));
  return sorted[rank - 1] ?? Number.NaN;
}

/** Percentiles and extremes of one strategy's converged runs. */
export function statsOf(strategy: Strategy, runs: number, samples: number[]): StrategyStats {
  const sorted = [...samples].sort((a, b) => a - b);
  const sum = sorted.reduce((a, b) => a + b, 0);
  return {
    strategy,
    runs,
    converged: sorted.length,
    p50: percentile(sorted, 50),
    p90: percentile(sorted, 90),
    p99: percentile(sorted, 99),
    min: sorted[0] ?? Number.NaN,
    max: sorted[sorted.length - 1] ?? Number.NaN,
    mean: sorted.length === 0 ? Number.NaN : sum / sorted.length,
    samplesMs: sorted,
  };
}

/** The base manifest (or a default one) with the replicas and scale-up strategy of a comparison. */
export function manifestFor(options: Pick<CompareOptions, 'replicas' | 'base'>, strategy: Strategy): ControlPlane {
  const base = options.base ?? validateControlPlane({ apiVersion: API_VERSION, kind: KIND, metadata: { name: 'simulate' } });
  const { spec } = base;
  return validateControlPlane({
    ...base,
    spec: { ...spec, replicas: options.replicas, scaleUp: { ...spec.scaleUp, strategy } },
  });
}

/** Virtual ms from the first pass to convergence for one run; undefined when it did not converge. */
export async function timeToReady(manifest: ControlPlane, seed: number, timings: Partial<ModelTimings>, timeoutMs: number): Promise<number | undefined> {
  const sim = new Simulation(manifest, { seed, timings, fastForward: true });
  const start = sim.clock.now();
  const result = await sim.run(timeoutMs);
  return result.outcome === 'Converged' ? sim.clock.now() - start : undefined;
}

export async function compareStrategies(options: CompareOptions): Promise<StrategyComparison> {
  const timings: Partial<ModelTimings> = { ...options.timings, provisioning: options.provisioning };
  const timeoutMs = options.timeoutMs ?? 6 * 3_600_000;
  const samples: Record<Strategy, number[]> = { parallel: [], serial: [] };
  for (const strategy of ['parallel', 'serial'] as const) {
    const manifest = manifestFor(options, strategy);
    for (let index = 0; index < options.runs; index++) {
      const ms = await timeToReady(manifest, options.seed + index, timings, timeoutMs);
      if (ms !== undefined) samples[strategy].push(ms);
      options.onRun?.({ strategy, index, ms });
    }
  }
  const parallel = statsOf('parallel', options.runs, samples.parallel);
  const serial = statsOf('serial', options.runs, samples.serial);
  return {
    replicas: options.replicas,
    provisioning: options.provisioning,
    runs: options.runs,
    seed: options.seed,
    parallel,
    serial,
    speedup: serial.p50 / parallel.p50,
  };
}

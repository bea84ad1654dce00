import { parseDurationRange, formatDuration } from '../../api/duration.ts';
import { InvalidInputError } from '../../api/errors.ts';
import { compareStrategies, type StrategyComparison, type StrategyStats } from '../../sim/compare.ts';
import { compareScenarios } from '../../sim/scenarios.ts';
import { parseOutput } from '../render.ts';
import { loadManifestForCli } from '../manifest-file.ts';
import { scenarioTable } from '../scenario-table.ts';
import { renderTable } from '../table.ts';

export interface SimulateFlags {
  file?: string;
  replicas?: string;
  provisioning: string;
  runs: string;
  seed: string;
  output: string;
}

function positiveInt(flag: string, text: string, max: number): number {
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > max) throw new InvalidInputError([`${flag}: must be a whole number from 1 to ${String(max)}, got ${text}`]);
  return Number(text);
}

function row(stats: StrategyStats): string[] {
  const f = (ms: number): string => (Number.isNaN(ms) ? '-' : formatDuration(ms));
  return [stats.strategy, f(stats.p50), f(stats.p90), f(stats.p99), f(stats.min), f(stats.max), `${String(stats.converged)}/${String(stats.runs)}`];
}

function table(result: StrategyComparison, wallMs: number): string {
  const { minMs, maxMs } = result.provisioning;
  const range = minMs === maxMs ? formatDuration(minMs) : `${formatDuration(minMs)}-${formatDuration(maxMs)}`;
  return [
    `${String(result.replicas)} members, provisioning ${range}, ${String(result.runs)} runs per strategy (virtual time, etcd timings measured on 3.4.23/3.5.16)`,
    renderTable([['STRATEGY', 'P50', 'P90', 'P99', 'MIN', 'MAX', 'CONVERGED'], row(result.parallel), row(result.serial)], { right: [1, 2, 3, 4, 5, 6] }),
    `speedup (serial p50 / parallel p50): ${result.speedup.toFixed(2)}x   simulated in ${(wallMs / 1000).toFixed(1)} s`,
  ].join('\n');
}

async function writeDocument(doc: unknown, format: 'json' | 'yaml'): Promise<void> {
  process.stdout.write(`${format === 'json' ? JSON.stringify(doc, null, 2) : (await import('yaml')).stringify(doc)}\n`);
}

/** `fastplane simulate`: what-if answers from the model in virtual time, fast. */
export async function simulateCommand(flags: SimulateFlags): Promise<number> {
  const format = parseOutput(flags.output);
  const provisioning = parseDurationRange(flags.provisioning);
  if (!provisioning) throw new InvalidInputError([`--provisioning: must be a duration (30s) or a range (8m-12m), got ${flags.provisioning}`]);
  const loaded = flags.file === undefined ? undefined : loadManifestForCli(flags.file);
  const replicas = positiveInt('--replicas', flags.replicas ?? String(loaded?.manifest.spec.replicas ?? 5), 9);
  if (replicas % 2 === 0) throw new InvalidInputError([`--replicas: must be odd, got ${String(replicas)}`]);
  const runs = positiveInt('--runs', flags.runs, 100_000);
  const seed = positiveInt('--seed', flags.seed, 2 ** 31);
  const started = performance.now();
  if (loaded !== undefined) {
    const base = { ...loaded.manifest, spec: { ...loaded.manifest.spec, replicas } };
    const scenarios = await compareScenarios({ base, provisioning, runs, seed });
    const wallMs = performance.now() - started;
    if (format === 'table') process.stdout.write(`${scenarioTable({ source: `${loaded.kind} ${base.metadata.name}`, base, provisioning, runs, scenarios, wallMs })}\n`);
    else await writeDocument({ source: loaded.kind, name: base.metadata.name, provisioning, runs, seed, wallSeconds: wallMs / 1000, scenarios: scenarios.map(({ serial, parallel, ...rest }) => ({ ...rest, serial: { ...serial, samplesMs: undefined }, parallel: { ...parallel, samplesMs: undefined } })) }, format);
    return 0;
  }
  const result = await compareStrategies({ replicas, provisioning, runs, seed });
  const wallMs = performance.now() - started;
  if (format === 'table') {
    process.stdout.write(`${table(result, wallMs)}\n`);
  } else {
    const { parallel, serial, ...rest } = result;
    await writeDocument({ ...rest, wallSeconds: wallMs / 1000, parallel: { ...parallel, samplesMs: undefined }, serial: { ...serial, samplesMs: undefined } }, format);
  }
  return 0;
}

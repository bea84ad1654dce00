import type { ControlPlane } from '../api/control-plane.ts';
import { formatDuration, type DurationRange } from '../api/duration.ts';
import type { StrategyStats } from '../sim/compare.ts';
import type { ScenarioComparison } from '../sim/scenarios.ts';

/** The `simulate -f` table: per scenario, KCP's one-at-a-time order against fastplane's parallel order. */
export interface ScenarioTableInput {
  source: string;
  base: ControlPlane;
  provisioning: DurationRange;
  runs: number;
  scenarios: readonly ScenarioComparison[];
  wallMs: number;
}

const ORDERS = { serial: 'KCP, one at a time', parallel: 'fastplane, parallel' } as const;

function cells(stats: StrategyStats): string {
  const f = (ms: number): string => (Number.isNaN(ms) ? '-' : formatDuration(ms)).padStart(8);
  return `${f(stats.p50)}${f(stats.p90)}${f(stats.p99)}   ${`${String(stats.converged)}/${String(stats.runs)}`.padStart(9)}`;
}

export function scenarioTable(input: ScenarioTableInput): string {
  const { minMs, maxMs } = input.provisioning;
  const range = minMs === maxMs ? formatDuration(minMs) : `${formatDuration(minMs)}-${formatDuration(maxMs)}`;
  const width = Math.max(...input.scenarios.map((s) => s.description.length), 'scenario'.length) + 2;
  const lines = [
    `${input.source}: ${String(input.base.spec.replicas)} members, etcd ${input.base.spec.version}, provisioning ${range}, ${String(input.runs)} runs per order (virtual time)`,
    `${'scenario'.padEnd(width)}${'order'.padEnd(22)}     p50     p90     p99   converged   speedup`,
  ];
  for (const s of input.scenarios) {
    lines.push(`${s.description.padEnd(width)}${ORDERS.serial.padEnd(22)}${cells(s.serial)}`);
    lines.push(`${''.padEnd(width)}${ORDERS.parallel.padEnd(22)}${cells(s.parallel)}   ${Number.isFinite(s.speedup) ? `${s.speedup.toFixed(2)}x` : '-'}`);
  }
  lines.push(`speedup = KCP p50 / fastplane p50; simulated in ${(input.wallMs / 1000).toFixed(1)} s`);
  return lines.join('\n');
}

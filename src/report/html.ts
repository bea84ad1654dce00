import { formatDuration } from '../api/duration.ts';
import type { BenchResult, Strategy, StrategyRun } from '../bench/result.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../domain/machine.ts';
import { buildTimeline, type ComponentBar, type Row, type Timeline, type TimelineEvent, type TimelineMachine } from './timeline.ts';
import type { MachineComponentTimes } from '../bench/component-metrics.ts';
import type { SweepSummary } from '../bench/sweep.ts';
import { renderSweepSvg } from './sweep-svg.ts';
import { CATEGORIES, COMPONENT_BARS, componentLegendHtml, escapeHtml, legendHtml, px, renderTimelineSvg } from './timeline-svg.ts';

/**
 * `fastplane report`'s HTML: one self-contained file (inline CSS and SVG, no script, nothing
 * fetched) with the cluster's timeline and, when the state dir holds a `fastplane bench` result, the
 * comparison of the bench's modes (serial, parallel, guarded) drawn with the same timeline.
 */

const STYLE = `
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif; color: #1f2937; margin: 18px 24px; background: #fff; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 26px 0 8px; } h3 { font-size: 14px; margin: 16px 0 6px; }
.meta { color: #4b5563; margin: 0 0 10px; }
.figures { display: flex; flex-wrap: wrap; gap: 10px; margin: 8px 0 12px; padding: 0; list-style: none; }
.figures li { border: 1px solid #e5e7eb; border-radius: 6px; padding: 6px 12px; min-width: 110px; }
.figures b { display: block; font-size: 18px; }
svg.timeline { display: block; max-width: 100%; height: auto; }
svg .tick { font-size: 11px; fill: #6b7280; text-anchor: middle; }
svg .label { font-size: 12px; fill: #111827; }
svg .row.removed .label { fill: #6b7280; font-style: italic; }
svg .grid { stroke: #eef0f3; stroke-width: 1; }
svg .lane { stroke: #d1d5db; stroke-dasharray: 2 3; }
svg .stripe { fill: transparent; } svg .row:nth-of-type(odd) .stripe { fill: #f9fafb; }
svg .squeezed rect { fill: #f3f4f6; } svg .squeezed text { font-style: italic; }
svg .refusal { stroke: #9ca3af; stroke-width: 1; }
svg .bar.open { opacity: 0.85; }
${CATEGORIES.map((c) => `svg .bar.${c.category} { fill: ${c.color}; }`).join('\n')}
${COMPONENT_BARS.map((c) => `svg .component.${c.kind} { fill: ${c.color}; }`).join('\n')}
.legend { display: flex; flex-wrap: wrap; gap: 4px 16px; list-style: none; padding: 0; margin: 8px 0 0; font-size: 12px; color: #374151; }
.legend li { display: flex; align-items: center; gap: 6px; }
table { border-collapse: collapse; font-size: 12px; } th, td { border-bottom: 1px solid #e5e7eb; padding: 3px 10px 3px 0; text-align: right; }
th:first-child, td:first-child { text-align: left; } th { color: #4b5563; font-weight: 600; }
.compare-bars .name { font-size: 12px; fill: #111827; } .compare-bars .value { font-size: 12px; fill: #374151; }
.note { color: #6b7280; font-size: 12px; max-width: 1100px; }
`;

function durationsTable(rows: Row[]): string {
  const shown = CATEGORIES.filter((c) => rows.some((r) => r.segments.some((s) => s.category === c.category)));
  const head = `<tr><th>machine</th>${shown.map((c) => `<th>${escapeHtml(c.category)}</th>`).join('')}</tr>`;
  const body = rows.map((r) => {
    const cells = shown.map((c) => {
      const ms = r.segments.filter((s) => s.category === c.category).reduce((sum, s) => sum + (s.end - s.start), 0);
      const open = r.segments.some((s) => s.category === c.category && s.open);
      return `<td>${ms > 0 ? escapeHtml(formatDuration(ms)) + (open ? '+' : '') : '-'}</td>`;
    });
    return `<tr><td>${escapeHtml(r.name)}${r.removed ? ' (removed)' : ''}</td>${cells.join('')}</tr>`;
  });
  return `<table class="durations"><thead>${head}</thead><tbody>${body.join('')}</tbody></table>`;
}

/** A bench strategy run as a timeline, its times in seconds from the start of the run. */
function timelineOfRun(run: StrategyRun, end: number): Timeline {
  const machines: TimelineMachine[] = run.machines.map((m) => ({
    name: m.name,
    phaseTimes: Object.fromEntries(Object.entries(m.phaseTimes).map(([phase, s]) => [phase, s * 1000])),
  }));
  const events: TimelineEvent[] = run.membership.map((e) => ({
    at: e.at * 1000,
    endedAt: e.endedAt * 1000,
    action: e.action,
    outcome: 'Succeeded',
    message: `${e.action}${e.machine === null ? '' : ` ${e.machine}`}`,
    ...(e.machine === null ? {} : { machine: e.machine }),
  }));
  const timeline = { ...buildTimeline(machines, events, { end }), start: 0 };
  const components = new Map(run.machines.flatMap((m) => (m.components === undefined ? [] : [[m.name, componentBars(m.components, end)] as const])));
  return {
    ...timeline,
    rows: timeline.rows.map((row) => {
      const bars = components.get(row.name);
      return bars === undefined ? row : { ...row, components: bars };
    }),
  };
}

/** A bench machine's component times (seconds) as bars (ms): each start to its ready, open to `end` when never seen ready. */
function componentBars(c: MachineComponentTimes, end: number): ComponentBar[] {
  const bars: ComponentBar[] = [];
  const push = (kind: ComponentBar['kind'], from: number | null, to: number | null): void => {
    if (from !== null) bars.push({ kind, start: from * 1000, end: to === null ? end : to * 1000, open: to === null });
  };
  push('apiserver', c.apiserverStartSeconds, c.apiserverReadySeconds);
  if (c.apiserverReadySeconds !== null) bars.push({ kind: 'apiserver-ready', start: c.apiserverReadySeconds * 1000, end, open: true });
  push('controllers', c.controllersStartSeconds, c.controllersReadySeconds);
  return bars;
}

/** Bar colours per mode: serial (KCP's order), parallel, parallel with fastplane's guard, and both with parallel learners. */
const MODE_COLORS: Record<Strategy, string> = { serial: '#9db4cf', parallel: '#3ca55c', guarded: '#2f7d9c', learners: '#c98a2b', 'guarded-learners': '#8a5cb8' };

function comparisonHtml(bench: BenchResult): string {
  const s = bench.settings;
  const fmt = (n: number | null, digits = 1): string => (n === null ? '-' : n.toFixed(digits));
  const modes = s.modes.flatMap((mode) => {
    const figures = bench.modes[mode];
    return figures === undefined ? [] : [{ mode, figures }];
  });
  const modeRows = modes
    .map(
      ({ mode, figures: f }) =>
        `<tr data-mode="${mode}"><td>${mode}</td><td>${fmt(f.seconds)}</td><td>${fmt(f.boundSeconds)}</td><td>${fmt(f.efficiency, 3)}</td><td>${f.speedup === null ? '-' : `${fmt(f.speedup, 2)}×`}</td><td>${String(f.refusals)}</td><td>${fmt(f.promotionLatency.medianSeconds, 3)} / ${fmt(f.promotionLatency.maxSeconds, 3)}</td></tr>`,
    )
    .join('');
  const bars = modes.map(({ mode, figures }) => ({ name: mode, value: figures.seconds, color: MODE_COLORS[mode] }));
  const longest = Math.max(...bars.map((b) => b.value), 1);
  const barSvg = `<svg class="compare-bars" width="720" height="${String(bars.length * 24 + 4)}" viewBox="0 0 720 ${String(bars.length * 24 + 4)}">${bars
    .map(({ name, value, color }, i) => {
      const width = (value / longest) * 520;
      return `<g data-strategy="${name}"><text class="name" x="0" y="${String(i * 24 + 16)}">${name}</text><rect x="90" y="${String(i * 24 + 4)}" width="${px(Math.max(1, width))}" height="16" rx="2" fill="${color}"/><text class="value" x="${px(96 + width)}" y="${String(i * 24 + 16)}">${fmt(value)} s</text></g>`;
    })
    .join('')}</svg>`;
  const first = bench.runs[0];
  let timelines = '';
  if (first) {
    const shown = s.modes.flatMap((strategy) => {
      const run = first[strategy];
      return run === undefined ? [] : [{ strategy, run }];
    });
    // One time scale for all, so the widths compare.
    const end = Math.max(...shown.flatMap(({ run }) => [run.seconds, ...run.machines.flatMap((m) => Object.values(m.phaseTimes))])) * 1000 + 1000;
    timelines = shown
      .map(({ strategy, run }) => `<h3>run 1, ${strategy}: ${fmt(run.seconds)} s</h3>${renderTimelineSvg(timelineOfRun(run, end), { squeezeIdle: false, id: `bench-${strategy}` })}`)
      .join('');
    if (shown.some(({ run }) => run.machines.some((m) => m.components !== undefined))) timelines += componentLegendHtml();
  }
  const runRows = bench.runs
    .map((r) => `<tr><td>${String(r.run)}</td><td>${r.order.join(', ')}</td>${modes.map(({ mode }) => `<td>${fmt(r[mode]?.seconds ?? null)} / ${fmt(r[mode]?.boundSeconds ?? null)}</td>`).join('')}</tr>`)
    .join('');
  const preload = bench.preload
    ? `<p class="note">Preload ${escapeHtml(String(bench.preload.bytes))} bytes, sent to learners as ${escapeHtml(String(bench.preload.snapshotBytes))}-byte snapshots (median). Copying those bytes over a loopback TCP socket takes ${fmt(bench.preload.loopbackCopySeconds, 2)} s; learner catch-up (median) took ${fmt(bench.preload.catchUpSeconds, 2)} s to promotion, ${fmt(bench.preload.dataCatchUpSeconds, 2)} s to the snapshot applied, of which the transfer ${fmt(bench.preload.snapshotReceiveSeconds, 2)} s. First publish timed out: ${escapeHtml(bench.preload.publishTimeouts)} learners.</p>`
    : '';
  return `<section id="comparison">
<h2>${escapeHtml(modes.map((m) => m.mode).join(' vs '))} (fastplane bench)</h2>
<p class="meta">${escapeHtml(`${String(s.replicas)} replicas, provisioning ${s.provisioningDelay}, etcd ${s.version}, ${String(s.runs)} run(s)${s.preloadBytes === null ? '' : `, preload ${String(s.preloadBytes)} bytes`}${s.hostBandwidth == null ? '' : s.linkLimit === 'both-directions' ? `, network lab, each host's link ${s.hostBandwidth} each way` : s.linkLimit === 'none' ? ', network lab, links unlimited' : `, ASYMMETRIC network lab, ${s.hostBandwidth} into each host only`}; ${bench.host.os}, ${String(bench.host.cpus)} × ${bench.host.cpuModel}; ${bench.finishedAt}`)}</p>
<table class="runs modes"><thead><tr><th>mode</th><th>seconds</th><th>bound s</th><th>efficiency</th><th>speedup vs serial</th><th>refusals</th><th>promotion latency median / max s</th></tr></thead><tbody>${modeRows}</tbody></table>
${barSvg}
<table class="runs"><thead><tr><th>run</th><th>order</th>${modes.map(({ mode }) => `<th>${mode} s / bound</th>`).join('')}</tr></thead><tbody>${runRows}</tbody></table>
${preload}
${timelines}
<p class="note">Seconds: from applying the spec to the pass that saw every voter healthy. Bound: the critical path from the provider's own ready time per machine, init (${fmt(bench.calibration.initSeconds, 3)} s) and join (${fmt(bench.calibration.joinSeconds, 3)} s) calibrated on a throwaway cluster before the runs, and etcd ${escapeHtml(bench.calibration.version)}'s add rule (${escapeHtml(bench.calibration.addRule)}); an efficiency above 1 is a model error, not clipped. Guarded: parallel with etcd's reconfiguration checks off and fastplane's in their place; its bound has no add rule. Promotion latency: learner caught up to listed as a voter, seen by a watcher of its own. Medians over runs.</p>
</section>`;
}

function sweepHtml(sweep: SweepSummary): string {
  return `<section id="sweep">
<h2>Where parallel learners help (fastplane bench --sweep)</h2>
<p class="meta">${escapeHtml(`${String(sweep.cells.length)} cells, ${sweep.startedAt} to ${sweep.finishedAt}`)}</p>
${renderSweepSvg(sweep)}
<p class="note">Per cell (each host's link rate, keyspace, provisioning): median seconds of parallel learners against serial (KCP's order) and against one learner at a time, from the cell's own bench. Above 1× learners are faster. The lab's hosts share one machine's CPU and disk.</p>
</section>`;
}

export interface ReportInput {
  controlPlane: ControlPlaneRecord;
  machines: MachineRecord[];
  events: EventRecord[];
  bench: BenchResult | undefined;
  /** The last `bench --sweep`, when the state dir holds one. */
  sweep?: SweepSummary | undefined;
  generatedAt: number;
}

/** The whole report as one HTML document; pure, so tests can render it without a cluster. */
export function renderReport(input: ReportInput): string {
  const { controlPlane: cp, bench } = input;
  const spec = cp.manifest.spec;
  const machines = [...input.machines].sort((a, b) => a.ordinal - b.ordinal);
  const timeline = buildTimeline(machines, input.events);
  const voters = machines.filter((m) => m.phase === 'Voter');
  const lastVoter = Math.max(...voters.map((m) => m.phaseTimes.Voter ?? 0));
  const converged = voters.length === spec.replicas && voters.length === machines.length;
  const changes = timeline.membership.filter((m) => m.succeeded).length;
  const refusals = timeline.membership.length - changes;
  const figures: [string, string][] = [
    ['machines', String(machines.length)],
    ['voters', `${String(voters.length)} / ${String(spec.replicas)}`],
    ['first machine to last voter', converged ? formatDuration(lastVoter - timeline.start) : '-'],
    ['membership changes', String(changes)],
    ['refused attempts', String(refusals)],
  ];
  const title = `fastplane timeline: ${cp.name}`;
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)}</title>
<style>${STYLE}</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
<p class="meta">${escapeHtml(`${String(spec.replicas)} replicas, etcd ${spec.version}, strategy ${spec.scaleUp.strategy}, provisioning ${spec.provider.provisioningDelay}; generated ${new Date(input.generatedAt).toISOString()}; times from ${new Date(timeline.start).toISOString()}`)}</p>
<ul class="figures">${figures.map(([k, v]) => `<li>${escapeHtml(k)}<b>${escapeHtml(v)}</b></li>`).join('')}</ul>
<section id="timeline">
${timeline.rows.length === 0 ? '<p class="note">No machine has been created yet.</p>' : renderTimelineSvg(timeline, { squeezeIdle: true, id: 'cluster-timeline' })}
${legendHtml()}
</section>
<section id="phases">
<h2>Time per phase</h2>
${durationsTable(timeline.rows)}
<p class="note">From each machine record's phase times (the time it was first seen in each phase); a trailing + marks the phase it is still in. Removed machines are rebuilt from the event log. Hover a bar or marker for details.</p>
</section>
${bench ? comparisonHtml(bench) : ''}
${input.sweep ? sweepHtml(input.sweep) : ''}
</body>
</html>
`;
}


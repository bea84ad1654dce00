import { existsSync, mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { formatDuration } from '../api/duration.ts';
import { InvalidInputError } from '../api/errors.ts';
import type { ControlPlaneRecord, EventRecord, MachinePhase, MachineRecord } from '../domain/machine.ts';
import type { MembershipAction } from '../planner/types.ts';
import type { BenchResult, StrategyRun } from './bench.ts';
import { EXIT } from './commands.ts';
import type { CliContext } from './context.ts';

/**
 * `fastplane report NAME`: one self-contained HTML file (inline CSS and SVG, no script, nothing
 * fetched) with the cluster's timeline: a row per machine with a bar per phase from its record's
 * phaseTimes, a marker for every membership change from the event log, and, when the state dir holds a
 * `fastplane bench` result, the serial-vs-parallel comparison drawn with the same timeline.
 */

export const MEMBERSHIP_ACTIONS: ReadonlySet<string> = new Set<MembershipAction['kind']>(['InitCluster', 'AddLearner', 'StartMember', 'PromoteLearner', 'MoveLeader', 'RemoveMember']);

/** Where `bench` saves its last result and `report` looks for it. */
export function benchResultPath(stateDir: string): string {
  return join(stateDir, 'bench', 'latest.json');
}

/** The last bench result, or undefined when there is none (or it is not one: then say so). */
export function loadBenchResult(stateDir: string): BenchResult | undefined {
  const path = benchResultPath(stateDir);
  if (!existsSync(path)) return undefined;
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'kind' in parsed && parsed.kind === 'fastplane-bench' && 'runs' in parsed && Array.isArray(parsed.runs)) {
      return parsed as BenchResult;
    }
  } catch {
    // Reported below, like any other unreadable file.
  }
  process.stderr.write(`warning: ${path} is not a fastplane bench result; the report leaves the comparison out\n`);
  return undefined;
}

// ---------------------------------------------------------------- timeline model

/** What a bar shows. Phases that read the same on a timeline share a category (Pending+Provisioning). */
export type Category = 'provisioning' | 'gate' | 'starting' | 'learner' | 'voter' | 'deleting' | 'failed' | 'history';

const CATEGORY_OF: Record<MachinePhase, Category> = {
  Pending: 'provisioning',
  Provisioning: 'provisioning',
  Provisioned: 'gate',
  Initializing: 'starting',
  Joining: 'starting',
  Learner: 'learner',
  Voter: 'voter',
  Deleting: 'deleting',
  Failed: 'failed',
};

const CATEGORIES: { category: Category; label: string; color: string }[] = [
  { category: 'provisioning', label: 'provisioning (Pending, Provisioning)', color: '#9db4cf' },
  { category: 'gate', label: 'waiting at the gate (Provisioned until its membership change)', color: '#f2c14e' },
  { category: 'starting', label: 'member starting (Initializing, Joining)', color: '#b39ddb' },
  { category: 'learner', label: 'learner (answering, catching up)', color: '#4f8fe6' },
  { category: 'voter', label: 'voter', color: '#3ca55c' },
  { category: 'deleting', label: 'deleting', color: '#e8735a' },
  { category: 'failed', label: 'failed', color: '#9b1c1c' },
  { category: 'history', label: 'removed machine before it joined (phases no longer on record)', color: '#d4d4d8' },
];

const ACTION_COLORS: Record<string, string> = {
  InitCluster: '#111827',
  AddLearner: '#1d4ed8',
  StartMember: '#6d28d9',
  PromoteLearner: '#15803d',
  MoveLeader: '#b45309',
  RemoveMember: '#b91c1c',
};

export interface Segment {
  category: Category;
  start: number;
  end: number;
  /** Still in this phase when the timeline ends. */
  open: boolean;
}

export interface Marker {
  action: string;
  at: number;
  endedAt: number;
  succeeded: boolean;
  machine: string | undefined;
  message: string;
}

export interface Row {
  name: string;
  /** Known only from the event log: the machine's record is gone (scaled down, replaced). */
  removed: boolean;
  segments: Segment[];
  markers: Marker[];
}

export interface Timeline {
  start: number;
  end: number;
  rows: Row[];
  /** Every membership change, succeeded or refused, for the cluster-wide row. */
  membership: Marker[];
}

/** The part of a machine record a timeline needs; bench results carry the same shape. */
export interface TimelineMachine {
  name: string;
  phaseTimes: Partial<Record<MachinePhase, number>>;
}

export type TimelineEvent = Pick<EventRecord, 'at' | 'action' | 'machine' | 'message'> & Partial<Pick<EventRecord, 'endedAt' | 'outcome'>>;

function toMarker(event: TimelineEvent): Marker {
  return { action: event.action ?? '', at: event.at, endedAt: event.endedAt ?? event.at, succeeded: event.outcome === 'Succeeded', machine: event.machine, message: event.message };
}

/**
 * Bars from a record's phaseTimes: each phase lasts until the next one; the current one until `end`.
 * The gate ends when the machine's own membership change starts (its InitCluster or AddLearner):
 * phases are recorded when observed, and an init member is often first seen already a voter, so
 * without the event its start-up would be drawn as waiting.
 */
function segmentsOfRecord(machine: TimelineMachine, end: number, admittedAt: number | undefined): Segment[] {
  const phases = (Object.entries(machine.phaseTimes) as [MachinePhase, number][]).sort((a, b) => a[1] - b[1]);
  const segments: Segment[] = [];
  phases.forEach(([phase, at], i) => {
    const next = phases[i + 1];
    const category = CATEGORY_OF[phase];
    const stop = next ? next[1] : end;
    const last = segments.at(-1);
    if (last && last.category === category) {
      last.end = stop;
      last.open = next === undefined;
    } else {
      segments.push({ category, start: at, end: stop, open: next === undefined });
    }
  });
  const gate = segments.find((s) => s.category === 'gate');
  if (gate && admittedAt !== undefined && admittedAt >= gate.start && admittedAt < gate.end) {
    const next = segments[segments.indexOf(gate) + 1];
    if (next?.category === 'starting') next.start = admittedAt;
    else segments.splice(segments.indexOf(gate) + 1, 0, { category: 'starting', start: admittedAt, end: gate.end, open: gate.open });
    gate.end = admittedAt;
    gate.open = false;
  }
  return segments.filter((s) => s.end > s.start || s.open);
}

/**
 * A machine whose record is gone (scaled down, replaced) still has its events: creation, its join or
 * init, promotion, removal and deletion. Those bound its learner, voter and deleting bars; provisioning
 * and the gate cannot be told apart any more, so they share one neutral bar.
 */
function segmentsOfRemoved(events: TimelineEvent[]): Segment[] {
  const done = events.filter((e) => e.outcome === 'Succeeded').sort((a, b) => a.at - b.at);
  const first = (action: string): TimelineEvent | undefined => done.find((e) => e.action === action);
  const endOf = (e: TimelineEvent): number => e.endedAt ?? e.at;
  const created = first('CreateMachine') ?? done[0];
  if (!created) return [];
  const init = first('InitCluster');
  const add = first('AddLearner');
  const promote = first('PromoteLearner');
  const joinedAt = init?.at ?? add?.at;
  const voterAt = init ? endOf(init) : promote ? endOf(promote) : undefined;
  const leaving = first('RequestMachineDeletion') ?? first('MarkMachineFailed') ?? first('RemoveMember') ?? first('DeleteMachine');
  const lastDeletion = done.filter((e) => e.action === 'DeleteMachine').at(-1);
  const gone = endOf(lastDeletion ?? done.at(-1) ?? created);
  const segments: Segment[] = [];
  const push = (category: Category, start: number | undefined, end: number | undefined): void => {
    if (start !== undefined && end !== undefined && end > start) segments.push({ category, start, end, open: false });
  };
  push('history', created.at, joinedAt ?? leaving?.at ?? gone);
  push(init ? 'starting' : 'learner', joinedAt, voterAt ?? leaving?.at);
  push('voter', voterAt, leaving?.at ?? gone);
  push('deleting', leaving?.at, gone);
  return segments;
}

/** Rows for the machines on record (by ordinal) and, after them, machines known only from events. */
export function buildTimeline(machines: TimelineMachine[], events: TimelineEvent[], options: { end?: number } = {}): Timeline {
  const membershipEvents = events.filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action));
  const points = [
    ...machines.flatMap((m) => Object.values(m.phaseTimes)),
    ...events.flatMap((e) => [e.at, e.endedAt ?? e.at]),
  ];
  const sorted = [...points].sort((a, b) => a - b);
  const start = sorted[0] ?? 0;
  const latest = sorted.at(-1) ?? 1;
  // A short tail after the last change, so bars still open visibly continue past it; sized on the
  // time that will be drawn to scale (idle gaps are squeezed), not on the whole span.
  const active = sorted.reduce((sum, t, i) => sum + Math.min(IDLE_GAP_MS, t - (sorted[i - 1] ?? t)), 0);
  const end = options.end ?? latest + Math.max(1000, active * 0.04);
  const markersOf = (name: string): Marker[] => membershipEvents.filter((e) => e.machine === name).map(toMarker);
  const admittedAt = (name: string): number | undefined =>
    membershipEvents.find((e) => e.machine === name && e.outcome === 'Succeeded' && (e.action === 'InitCluster' || e.action === 'AddLearner'))?.at;
  const rows: Row[] = machines.map((m) => ({ name: m.name, removed: false, segments: segmentsOfRecord(m, end, admittedAt(m.name)), markers: markersOf(m.name) }));
  const onRecord = new Set(machines.map((m) => m.name));
  const removedNames = [...new Set(events.flatMap((e) => (e.machine !== undefined && !onRecord.has(e.machine) ? [e.machine] : [])))];
  for (const name of removedNames) {
    rows.push({ name, removed: true, segments: segmentsOfRemoved(events.filter((e) => e.machine === name)), markers: markersOf(name) });
  }
  // In order of appearance, so a replaced machine sits where it lived, not after every live one.
  const firstSeen = (row: Row): number => row.segments[0]?.start ?? row.markers[0]?.at ?? end;
  rows.sort((a, b) => firstSeen(a) - firstSeen(b) || a.name.localeCompare(b.name, 'en', { numeric: true }));
  return { start, end, rows, membership: membershipEvents.map(toMarker) };
}

// ---------------------------------------------------------------- time axis

/** A stretch of the time axis: drawn to scale, or an idle gap squeezed to a fixed width. */
interface Piece {
  from: number;
  to: number;
  squeezed: boolean;
}

const IDLE_GAP_MS = 30_000;
const SQUEEZED_PX = 28;

/**
 * Stretches longer than 30 s in which every machine is a voter and nothing changes (the hours between
 * an `up` and a later `scale`) are squeezed, so the interesting minutes keep their width.
 */
function piecesOf(timeline: Timeline, squeezeIdle: boolean): Piece[] {
  if (!squeezeIdle) return [{ from: timeline.start, to: timeline.end, squeezed: false }];
  const segments = timeline.rows.flatMap((r) => r.segments);
  const points = [...new Set([timeline.start, timeline.end, ...segments.flatMap((s) => [s.start, s.end]), ...timeline.membership.flatMap((m) => [m.at, m.endedAt])])]
    .filter((t) => t >= timeline.start && t <= timeline.end)
    .sort((a, b) => a - b);
  const pieces: Piece[] = [];
  for (const [i, from] of points.entries()) {
    const to = points[i + 1];
    if (to === undefined) break;
    const busy = segments.some((s) => s.category !== 'voter' && s.start < to && s.end > from);
    const squeezed = !busy && to - from > IDLE_GAP_MS && to !== timeline.end;
    const last = pieces.at(-1);
    if (last && !last.squeezed && !squeezed) last.to = to;
    else pieces.push({ from, to, squeezed });
  }
  return pieces.length > 0 ? pieces : [{ from: timeline.start, to: timeline.end, squeezed: false }];
}

class TimeScale {
  private readonly pxPerMs: number;

  constructor(
    readonly pieces: Piece[],
    private readonly x0: number,
    width: number,
  ) {
    const squeezedPx = pieces.filter((p) => p.squeezed).length * SQUEEZED_PX;
    const drawnMs = pieces.filter((p) => !p.squeezed).reduce((sum, p) => sum + (p.to - p.from), 0);
    this.pxPerMs = drawnMs > 0 ? Math.max(0, width - squeezedPx) / drawnMs : 0;
  }

  x(t: number): number {
    let x = this.x0;
    for (const piece of this.pieces) {
      const px = piece.squeezed ? SQUEEZED_PX : (piece.to - piece.from) * this.pxPerMs;
      if (t <= piece.to) {
        const span = piece.to - piece.from;
        return x + (span > 0 ? (Math.max(0, t - piece.from) / span) * px : 0);
      }
      x += px;
    }
    return x;
  }

  /**
   * Tick times: a round step giving about ten ticks over the drawn time, none inside a squeezed gap
   * or so close to one that its label would run into the gap's.
   */
  ticks(start: number): { times: number[]; stepMs: number } {
    const drawnMs = this.pieces.filter((p) => !p.squeezed).reduce((sum, p) => sum + (p.to - p.from), 0);
    const steps = [500, 1000, 2000, 5000, 10_000, 15_000, 30_000, 60_000, 120_000, 300_000, 600_000, 1_800_000, 3_600_000];
    const stepMs = steps.find((s) => drawnMs / s <= 12) ?? 7_200_000;
    const gaps = this.pieces.filter((p) => p.squeezed).map((p) => [this.x(p.from), this.x(p.to)] as const);
    const times: number[] = [];
    for (const piece of this.pieces.filter((p) => !p.squeezed)) {
      for (let t = start + Math.ceil((piece.from - start) / stepMs) * stepMs; t <= piece.to; t += stepMs) {
        const x = this.x(t);
        if (!gaps.some(([from, to]) => x > from - 30 && x < to + 30)) times.push(t);
      }
    }
    return { times, stepMs };
  }
}

// ---------------------------------------------------------------- rendering

/** Axis labels: `12s`, `1m05s`, `2h00m10s`, to the precision the tick step needs. */
function tickLabel(ms: number, stepMs: number): string {
  if (stepMs < 1000) return `${(ms / 1000).toFixed(1)}s`;
  const total = Math.round(ms / 1000);
  const h = Math.floor(total / 3600);
  const m = Math.floor((total % 3600) / 60);
  const sec = total % 60;
  const two = (n: number): string => String(n).padStart(2, '0');
  if (total < 60) return `${String(total)}s`;
  if (h === 0) return stepMs >= 60_000 ? `${String(m)}m` : `${String(m)}m${two(sec)}s`;
  return stepMs >= 60_000 ? `${String(h)}h${two(m)}m` : `${String(h)}h${two(m)}m${two(sec)}s`;
}

const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
const px = (n: number): string => n.toFixed(1);
const offset = (ms: number): string => (ms <= 0 ? '0s' : formatDuration(ms));

const LABEL_WIDTH = 170;
const CHART_WIDTH = 1120;
const ROW_HEIGHT = 26;
const BAR_HEIGHT = 14;
const AXIS_HEIGHT = 26;

function diamond(cx: number, cy: number, r: number): string {
  return `${px(cx)},${px(cy - r)} ${px(cx + r)},${px(cy)} ${px(cx)},${px(cy + r)} ${px(cx - r)},${px(cy)}`;
}

function markerSvg(marker: Marker, scale: TimeScale, cy: number, start: number): string {
  const x = scale.x(marker.at);
  const when = `+${offset(marker.at - start)}${marker.endedAt > marker.at ? `, took ${formatDuration(marker.endedAt - marker.at)}` : ''}`;
  const title = `<title>${escapeHtml(`${marker.message} (${when})`)}</title>`;
  if (!marker.succeeded) {
    // Refusals (the 5 s rule, a learner not yet in sync) come in bursts: a faint tick each.
    return `<line class="refusal" data-action="${escapeHtml(marker.action)}" x1="${px(x)}" x2="${px(x)}" y1="${px(cy - 9)}" y2="${px(cy - 5)}">${title}</line>`;
  }
  const color = ACTION_COLORS[marker.action] ?? '#374151';
  const span = scale.x(marker.endedAt) - x;
  const line = span >= 2 ? `<line x1="${px(x)}" x2="${px(x + span)}" y1="${px(cy)}" y2="${px(cy)}" stroke="${color}" stroke-width="2"/>` : '';
  return `<g class="marker" data-action="${escapeHtml(marker.action)}">${line}<polygon points="${diamond(x, cy, 5)}" fill="${color}" stroke="#fff" stroke-width="1"/>${title}</g>`;
}

/** The timeline as one SVG: time axis, a cluster-wide membership row, then one row per machine. */
export function renderTimelineSvg(timeline: Timeline, options: { squeezeIdle: boolean; id: string }): string {
  const plotWidth = CHART_WIDTH - LABEL_WIDTH - 16;
  const scale = new TimeScale(piecesOf(timeline, options.squeezeIdle), LABEL_WIDTH, plotWidth);
  const rowsTop = AXIS_HEIGHT + ROW_HEIGHT;
  const height = rowsTop + timeline.rows.length * ROW_HEIGHT + 8;
  const parts: string[] = [];
  const ticks = scale.ticks(timeline.start);
  for (const t of ticks.times) {
    const x = scale.x(t);
    parts.push(`<line class="grid" x1="${px(x)}" x2="${px(x)}" y1="${String(AXIS_HEIGHT - 6)}" y2="${String(height - 8)}"/>`);
    parts.push(`<text class="tick" x="${px(x)}" y="${String(AXIS_HEIGHT - 10)}">${escapeHtml(tickLabel(t - timeline.start, ticks.stepMs))}</text>`);
  }
  for (const piece of scale.pieces.filter((p) => p.squeezed)) {
    const x = scale.x(piece.from);
    parts.push(
      `<g class="squeezed"><rect x="${px(x + 2)}" y="${String(AXIS_HEIGHT - 6)}" width="${String(SQUEEZED_PX - 4)}" height="${String(height - AXIS_HEIGHT - 2)}"/>` +
        `<text class="tick" x="${px(x + SQUEEZED_PX / 2)}" y="${String(AXIS_HEIGHT - 10)}">${escapeHtml(`…${formatDuration(piece.to - piece.from)}…`)}</text></g>`,
    );
  }
  // The cluster-wide row: every membership change, so their one-at-a-time order is visible at a glance.
  const membershipY = AXIS_HEIGHT + ROW_HEIGHT / 2;
  parts.push(`<g class="membership-row"><text class="label" x="8" y="${px(membershipY + 4)}">etcd membership</text>`);
  parts.push(`<line class="lane" x1="${String(LABEL_WIDTH)}" x2="${String(LABEL_WIDTH + plotWidth)}" y1="${px(membershipY)}" y2="${px(membershipY)}"/>`);
  for (const marker of timeline.membership) parts.push(markerSvg(marker, scale, membershipY, timeline.start));
  parts.push('</g>');
  timeline.rows.forEach((row, i) => {
    const top = rowsTop + i * ROW_HEIGHT;
    const cy = top + ROW_HEIGHT / 2;
    const label = row.removed ? `${row.name} (removed)` : row.name;
    parts.push(`<g class="row${row.removed ? ' removed' : ''}" data-machine="${escapeHtml(row.name)}">`);
    parts.push(`<rect class="stripe" x="0" y="${String(top)}" width="${String(CHART_WIDTH)}" height="${String(ROW_HEIGHT)}"/>`);
    parts.push(`<text class="label" x="8" y="${px(cy + 4)}">${escapeHtml(label)}</text>`);
    for (const s of row.segments) {
      const x = scale.x(s.start);
      const width = Math.max(1, scale.x(s.end) - x);
      const took = s.open ? `${offset(s.end - s.start)} so far` : offset(s.end - s.start);
      parts.push(
        `<rect class="bar ${s.category}${s.open ? ' open' : ''}" data-phase="${s.category}" x="${px(x)}" y="${px(cy - BAR_HEIGHT / 2)}" width="${px(width)}" height="${String(BAR_HEIGHT)}" rx="2">` +
          `<title>${escapeHtml(`${row.name}: ${s.category}, +${offset(s.start - timeline.start)} for ${took}`)}</title></rect>`,
      );
    }
    for (const marker of row.markers) parts.push(markerSvg(marker, scale, cy, timeline.start));
    parts.push('</g>');
  });
  return `<svg class="timeline" id="${escapeHtml(options.id)}" xmlns="http://www.w3.org/2000/svg" width="${String(CHART_WIDTH)}" height="${String(height)}" viewBox="0 0 ${String(CHART_WIDTH)} ${String(height)}" role="img" aria-label="timeline">${parts.join('')}</svg>`;
}

function legendHtml(): string {
  const bars = CATEGORIES.map(
    (c) => `<li data-legend="${c.category}"><svg width="22" height="12"><rect class="bar ${c.category}" width="22" height="12" rx="2"/></svg>${escapeHtml(c.label)}</li>`,
  );
  const markers = Object.entries(ACTION_COLORS).map(
    ([action, color]) => `<li data-legend="${action}"><svg width="14" height="14"><polygon points="${diamond(7, 7, 6)}" fill="${color}"/></svg>${escapeHtml(action)}</li>`,
  );
  const refusal = '<li data-legend="refusal"><svg width="14" height="14"><line class="refusal" x1="7" x2="7" y1="2" y2="12"/></svg>refused attempt, retried (5 s rule, not yet in sync)</li>';
  return `<ul class="legend">${[...bars, ...markers, refusal].join('')}</ul>`;
}

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
  return { ...buildTimeline(machines, events, { end }), start: 0 };
}

function comparisonHtml(bench: BenchResult): string {
  const s = bench.settings;
  const fmt = (n: number | null, digits = 1): string => (n === null ? '-' : n.toFixed(digits));
  const figures: [string, string][] = [
    ['serial (KCP order)', `${fmt(bench.serialSeconds)} s`],
    ['parallel', `${fmt(bench.parallelSeconds)} s`],
    ['critical-path bound', `${fmt(bench.boundSeconds)} s`],
    ['speedup serial / parallel', `${fmt(bench.speedup, 2)}×`],
    ['efficiency bound / parallel', fmt(bench.efficiency, 2)],
    ['promotion latency (median)', `${fmt(bench.promotionLatencySeconds.parallel, 3)} s`],
  ];
  const bars: [string, number, string][] = [
    ['serial', bench.serialSeconds, '#9db4cf'],
    ['parallel', bench.parallelSeconds, '#3ca55c'],
    ['bound', bench.boundSeconds, '#d4d4d8'],
  ];
  const longest = Math.max(...bars.map((b) => b[1]), 1);
  const barSvg = `<svg class="compare-bars" width="720" height="${String(bars.length * 24 + 4)}" viewBox="0 0 720 ${String(bars.length * 24 + 4)}">${bars
    .map(([name, value, color], i) => {
      const width = (value / longest) * 520;
      return `<g data-strategy="${name}"><text class="name" x="0" y="${String(i * 24 + 16)}">${name}</text><rect x="90" y="${String(i * 24 + 4)}" width="${px(Math.max(1, width))}" height="16" rx="2" fill="${color}"/><text class="value" x="${px(96 + width)}" y="${String(i * 24 + 16)}">${fmt(value)} s</text></g>`;
    })
    .join('')}</svg>`;
  const first = bench.runs[0];
  let timelines = '';
  if (first) {
    // One time scale for both, so the widths compare.
    const end = Math.max(first.serial.seconds, first.parallel.seconds, ...[first.serial, first.parallel].flatMap((r) => r.machines.flatMap((m) => Object.values(m.phaseTimes)))) * 1000 + 1000;
    timelines = (['serial', 'parallel'] as const)
      .map((strategy) => `<h3>run 1, ${strategy}: ${fmt(first[strategy].seconds)} s</h3>${renderTimelineSvg(timelineOfRun(first[strategy], end), { squeezeIdle: false, id: `bench-${strategy}` })}`)
      .join('');
  }
  const runRows = bench.runs
    .map((r) => `<tr><td>${String(r.run)}</td><td>${r.order.join(', ')}</td><td>${fmt(r.serial.seconds)}</td><td>${fmt(r.parallel.seconds)}</td><td>${fmt(r.parallel.boundSeconds)}</td><td>${fmt(r.speedup, 2)}</td><td>${fmt(r.efficiency, 2)}</td></tr>`)
    .join('');
  const preload = bench.preload
    ? `<p class="note">Preload ${escapeHtml(String(bench.preload.bytes))} bytes, sent to learners as ${escapeHtml(String(bench.preload.snapshotBytes))}-byte snapshots (median). Copying those bytes over a loopback TCP socket takes ${fmt(bench.preload.loopbackCopySeconds, 2)} s; learner catch-up (median) took ${fmt(bench.preload.catchUpSeconds, 2)} s to promotion, ${fmt(bench.preload.dataCatchUpSeconds, 2)} s to the snapshot applied, of which the transfer ${fmt(bench.preload.snapshotReceiveSeconds, 2)} s. First publish timed out: ${escapeHtml(bench.preload.publishTimeouts)} learners.</p>`
    : '';
  return `<section id="comparison">
<h2>Serial vs parallel (fastplane bench)</h2>
<p class="meta">${escapeHtml(`${String(s.replicas)} replicas, provisioning ${s.provisioningDelay}, etcd ${s.version}, ${String(s.runs)} run(s)${s.preloadBytes === null ? '' : `, preload ${String(s.preloadBytes)} bytes`}; ${bench.host.os}, ${String(bench.host.cpus)} × ${bench.host.cpuModel}; ${bench.finishedAt}`)}</p>
<ul class="figures">${figures.map(([k, v]) => `<li>${escapeHtml(k)}<b>${escapeHtml(v)}</b></li>`).join('')}</ul>
${barSvg}
<table class="runs"><thead><tr><th>run</th><th>order</th><th>serial s</th><th>parallel s</th><th>bound s</th><th>speedup</th><th>efficiency</th></tr></thead><tbody>${runRows}</tbody></table>
${preload}
${timelines}
<p class="note">Seconds: from applying the spec to the pass that saw every voter healthy. Bound: max(slowest provisioning, first provisioning + init + (N−2) × 5 s) + minimal join, from the run's measured provisioning times. Medians over runs.</p>
</section>`;
}

export interface ReportInput {
  controlPlane: ControlPlaneRecord;
  machines: MachineRecord[];
  events: EventRecord[];
  bench: BenchResult | undefined;
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
</body>
</html>
`;
}

export async function reportCommand(ctx: CliContext, name: string, flags: { out?: string }): Promise<number> {
  const cp = await ctx.store.getControlPlane(name);
  if (!cp) throw new InvalidInputError([`no control plane named ${name} in ${ctx.stateDir}`]);
  let out: string;
  if (flags.out === undefined) {
    out = join(ctx.stateDir, 'reports', `${name}.html`);
    mkdirSync(dirname(out), { recursive: true });
  } else {
    out = resolve(flags.out);
    if (existsSync(out) && statSync(out).isDirectory()) throw new InvalidInputError([`--out: ${flags.out} is a folder; give a file name such as ${name}.html`]);
    if (!existsSync(dirname(out))) throw new InvalidInputError([`--out: folder ${dirname(out)} does not exist`]);
  }
  const html = renderReport({ controlPlane: cp, machines: await ctx.store.listMachines(name), events: await ctx.store.listEvents(name), bench: loadBenchResult(ctx.stateDir), generatedAt: Date.now() });
  writeFileSync(out, html);
  process.stdout.write(`${out}\n`);
  return EXIT.converged;
}

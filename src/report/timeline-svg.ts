import { formatDuration } from '../api/duration.ts';
import { IDLE_GAP_MS, type Category, type ComponentBar, type ComponentBarKind, type Marker, type Timeline } from './timeline.ts';

/** The timeline drawn as inline SVG (no script, nothing fetched), with its legend. */

export const CATEGORIES: { category: Category; label: string; color: string }[] = [
  { category: 'provisioning', label: 'provisioning (Pending, Provisioning)', color: '#9db4cf' },
  { category: 'gate', label: 'waiting at the gate (Provisioned until its membership change)', color: '#f2c14e' },
  { category: 'starting', label: 'member starting (Initializing, Joining)', color: '#b39ddb' },
  { category: 'learner', label: 'learner (answering, catching up)', color: '#4f8fe6' },
  { category: 'voter', label: 'voter', color: '#3ca55c' },
  { category: 'deleting', label: 'deleting', color: '#e8735a' },
  { category: 'failed', label: 'failed', color: '#9b1c1c' },
  { category: 'history', label: 'removed machine before it joined (phases no longer on record)', color: '#d4d4d8' },
];

export const COMPONENT_BARS: { kind: ComponentBarKind; label: string; color: string }[] = [
  { kind: 'apiserver', label: 'kube-apiserver starting (started, until /readyz ok)', color: '#d97706' },
  { kind: 'apiserver-ready', label: 'kube-apiserver ready', color: '#fcd34d' },
  { kind: 'controllers', label: 'controller-manager and scheduler starting (until both healthy)', color: '#7c3aed' },
];

const ACTION_COLORS: Record<string, string> = {
  InitCluster: '#111827',
  AddLearner: '#1d4ed8',
  StartMember: '#6d28d9',
  PromoteLearner: '#15803d',
  MoveLeader: '#b45309',
  RemoveMember: '#b91c1c',
};


/** A stretch of the time axis: drawn to scale, or an idle gap squeezed to a fixed width. */
interface Piece {
  from: number;
  to: number;
  squeezed: boolean;
}

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

export const escapeHtml = (text: string): string => text.replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c] ?? c);
export const px = (n: number): string => n.toFixed(1);
const offset = (ms: number): string => (ms <= 0 ? '0s' : formatDuration(ms));

const LABEL_WIDTH = 170;
const CHART_WIDTH = 1120;
const ROW_HEIGHT = 26;
const BAR_HEIGHT = 14;
const AXIS_HEIGHT = 26;
/** Component bars: a thin strip under the member's bar, inside the row. */
const COMPONENT_BAR_HEIGHT = 4;

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

function componentBarSvg(machine: string, bar: ComponentBar, scale: TimeScale, top: number, start: number): string {
  const x = scale.x(bar.start);
  const width = Math.max(1, scale.x(bar.end) - x);
  const label = COMPONENT_BARS.find((c) => c.kind === bar.kind)?.label ?? bar.kind;
  const took = bar.open ? `${offset(bar.end - bar.start)} so far` : offset(bar.end - bar.start);
  return (
    `<rect class="component ${bar.kind}${bar.open ? ' open' : ''}" data-component="${bar.kind}" x="${px(x)}" y="${px(top)}" width="${px(width)}" height="${String(COMPONENT_BAR_HEIGHT)}">` +
    `<title>${escapeHtml(`${machine}: ${label}, +${offset(bar.start - start)} for ${took}`)}</title></rect>`
  );
}

/** The legend of the component bars, for timelines that have them. */
export function componentLegendHtml(): string {
  const items = COMPONENT_BARS.map((c) => `<li data-legend="${c.kind}"><svg width="22" height="6"><rect class="component ${c.kind}" width="22" height="6"/></svg>${escapeHtml(c.label)}</li>`);
  return `<ul class="legend">${items.join('')}</ul>`;
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
    for (const bar of row.components ?? []) parts.push(componentBarSvg(row.name, bar, scale, cy + BAR_HEIGHT / 2 + 1, timeline.start));
    for (const marker of row.markers) parts.push(markerSvg(marker, scale, cy, timeline.start));
    parts.push('</g>');
  });
  return `<svg class="timeline" id="${escapeHtml(options.id)}" xmlns="http://www.w3.org/2000/svg" width="${String(CHART_WIDTH)}" height="${String(height)}" viewBox="0 0 ${String(CHART_WIDTH)} ${String(height)}" role="img" aria-label="timeline">${parts.join('')}</svg>`;
}

export function legendHtml(): string {
  const bars = CATEGORIES.map(
    (c) => `<li data-legend="${c.category}"><svg width="22" height="12"><rect class="bar ${c.category}" width="22" height="12" rx="2"/></svg>${escapeHtml(c.label)}</li>`,
  );
  const markers = Object.entries(ACTION_COLORS).map(
    ([action, color]) => `<li data-legend="${action}"><svg width="14" height="14"><polygon points="${diamond(7, 7, 6)}" fill="${color}"/></svg>${escapeHtml(action)}</li>`,
  );
  const refusal = '<li data-legend="refusal"><svg width="14" height="14"><line class="refusal" x1="7" x2="7" y1="2" y2="12"/></svg>refused attempt, retried (5 s rule, not yet in sync)</li>';
  return `<ul class="legend">${[...bars, ...markers, refusal].join('')}</ul>`;
}

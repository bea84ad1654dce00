import type { SweepSummary } from '../bench/sweep.ts';
import { escapeHtml, px } from './timeline-svg.ts';

/**
 * The sweep's map as bars, one group per cell: parallel learners' gain over serial (KCP's order) and
 * over one learner at a time, each as the cell's JSON has it, against a line at 1× (no gain).
 */

const SERIES = [
  { key: 'learnersOverSerial', label: 'learners vs serial', color: '#2563eb' },
  { key: 'learnersOverOneAtATime', label: 'learners vs one at a time', color: '#f59e0b' },
] as const;

const LABEL_WIDTH = 250;
const BAR_AREA = 420;
const ROW = 18;

export function renderSweepSvg(summary: SweepSummary): string {
  const cells = summary.cells;
  const values = cells.flatMap((c) => SERIES.map((s) => c[s.key] ?? 0));
  const top = Math.max(2, ...values);
  const scale = (v: number): number => (v / top) * BAR_AREA;
  const groupHeight = SERIES.length * ROW + 10;
  const height = cells.length * groupHeight + 30;
  const groups = cells
    .map((cell, i) => {
      const y = i * groupHeight;
      const name = `${cell.hostBandwidth}, ${cell.keyspaceBytes === 0 ? 'no keyspace' : `${String(cell.keyspaceBytes / 1024 ** 2)} MiB`}, ${cell.provisioningDelay}${cell.modelErrors > 0 ? ' (model error)' : ''}`;
      const bars = SERIES.map((s, j) => {
        const value = cell[s.key];
        const by = y + j * ROW;
        if (value === null) return `<text class="value" x="${String(LABEL_WIDTH + 4)}" y="${String(by + 13)}">-</text>`;
        const w = scale(value);
        return `<rect class="gain" data-series="${s.key}" x="${String(LABEL_WIDTH)}" y="${String(by + 2)}" width="${px(Math.max(1, w))}" height="14" rx="2" fill="${s.color}"><title>${escapeHtml(`${s.label}: ${value.toFixed(3)}×`)}</title></rect><text class="value" x="${px(LABEL_WIDTH + w + 4)}" y="${String(by + 13)}">${value.toFixed(2)}×</text>`;
      }).join('');
      return `<g class="cell" data-cell="${String(i + 1)}"><text class="label" x="0" y="${String(y + 13)}">${escapeHtml(name)}</text>${bars}</g>`;
    })
    .join('');
  const one = LABEL_WIDTH + scale(1);
  const legend = SERIES.map((s, i) => `<rect x="${String(LABEL_WIDTH + i * 200)}" y="${String(height - 14)}" width="10" height="10" fill="${s.color}"/><text class="tick" x="${String(LABEL_WIDTH + i * 200 + 14)}" y="${String(height - 5)}" style="text-anchor:start">${escapeHtml(s.label)}</text>`).join('');
  return `<svg class="sweep" xmlns="http://www.w3.org/2000/svg" width="${String(LABEL_WIDTH + BAR_AREA + 60)}" height="${String(height)}" viewBox="0 0 ${String(LABEL_WIDTH + BAR_AREA + 60)} ${String(height)}" font-family="system-ui, sans-serif" font-size="12">${groups}<line class="lane" x1="${px(one)}" x2="${px(one)}" y1="0" y2="${String(height - 20)}" stroke="#6b7280" stroke-dasharray="2 3"/><text class="tick" x="${px(one)}" y="${String(height - 20)}" fill="#6b7280" text-anchor="middle">1×</text>${legend}</svg>`;
}

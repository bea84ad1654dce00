/** Durations as users write them: `500ms`, `8s`, `2m`, `1h`, and ranges `3s-8s` for provisioning delays. */

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
/** One duration's form, also matched by the CRD's CEL rules (src/api/crd-rules.ts). */
export const DURATION_SOURCE = '(\\d+(?:\\.\\d+)?)(ms|s|m|h)';
const DURATION = new RegExp(`^${DURATION_SOURCE}$`);

/** Parses one duration into milliseconds; undefined when the text is not a duration. */
export function parseDuration(text: string): number | undefined {
  const match = DURATION.exec(text.trim());
  if (!match) return undefined;
  const [, amount, unit] = match;
  const factor = UNIT_MS[unit ?? ''];
  if (amount === undefined || factor === undefined) return undefined;
  return Math.round(Number(amount) * factor);
}

export interface DurationRange {
  minMs: number;
  maxMs: number;
}

/** Parses `8s` (a fixed delay) or `3s-8s` (uniform in the range); undefined when invalid or reversed. */
export function parseDurationRange(text: string): DurationRange | undefined {
  const parts = text.split('-');
  if (parts.length === 1) {
    const ms = parseDuration(text);
    return ms === undefined ? undefined : { minMs: ms, maxMs: ms };
  }
  if (parts.length !== 2) return undefined;
  const minMs = parseDuration(parts[0] ?? '');
  const maxMs = parseDuration(parts[1] ?? '');
  if (minMs === undefined || maxMs === undefined || minMs > maxMs) return undefined;
  return { minMs, maxMs };
}

/** A delay drawn uniformly from the range; `random` in [0, 1) (injected, so tests can fix it). */
export function drawDuration(range: DurationRange, random: () => number): number {
  return range.minMs + Math.round((range.maxMs - range.minMs) * random());
}

/** Renders milliseconds the way users write them (`1.5s`, `2m`), for messages and status. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${String(Math.round(ms))}ms`;
  if (ms < 60_000) return `${String(Math.round(ms / 100) / 10)}s`;
  if (ms < 3_600_000) return `${String(Math.round(ms / 6000) / 10)}m`;
  return `${String(Math.round(ms / 360_000) / 10)}h`;
}

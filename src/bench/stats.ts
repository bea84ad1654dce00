/** Small figures helpers shared by the benchmarks: every figure is rounded to what was measured. */

export function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

/** Milliseconds as seconds to the millisecond. */
export const seconds = (ms: number): number => Math.round(ms) / 1000;

/** A median of second figures, to the millisecond they were measured with (no 0.0045000000000000005). */
export function medianSeconds(values: readonly number[]): number | undefined {
  const m = median(values);
  return m === undefined ? undefined : seconds(m * 1000);
}

/** a / b to three decimals; 0 when b is not positive. Never clipped: a ratio above 1 stays above 1. */
export const ratio = (a: number, b: number): number => (b > 0 ? Math.round((a / b) * 1000) / 1000 : 0);

/** Median and maximum of second figures; nulls when there is none. */
export function medianAndMax(values: readonly number[]): { medianSeconds: number | null; maxSeconds: number | null } {
  return { medianSeconds: medianSeconds(values) ?? null, maxSeconds: values.length === 0 ? null : Math.max(...values) };
}

import type { DurationRange } from '../api/duration.ts';

/** mulberry32: small, fast and seedable, so every simulated run can be replayed from its seed. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A draw from the range, uniform; a fixed duration when min == max. */
export function drawDuration(range: DurationRange, random: () => number): number {
  return range.minMs + Math.round((range.maxMs - range.minMs) * random());
}

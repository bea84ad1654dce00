/** Orders dotted numeric versions (3.4.23 < 3.5.16 < 3.6.0). Free of the schema library: status loads it. */
export function compareVersions(a: string, b: string): number {
  const pa = partsOf(a);
  const pb = partsOf(b);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** Versions already split: the planner compares the same few versions many times per pass. */
const parsedVersions = new Map<string, readonly number[]>();

function partsOf(version: string): readonly number[] {
  let parts = parsedVersions.get(version);
  if (parts === undefined) {
    parts = version.split('.').map(Number);
    if (parsedVersions.size >= 1024) parsedVersions.clear();
    parsedVersions.set(version, parts);
  }
  return parts;
}

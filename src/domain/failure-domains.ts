/**
 * Places `count` new machines over the failure domains, least crowded first, updating the counts after
 * each placement so a whole batch spreads evenly (KCP decides once per machine). Ties go to the domain
 * listed first. Undefined entries when there are no domains.
 */
export function spreadOverFailureDomains(
  domains: readonly string[],
  existing: readonly (string | undefined)[],
  count: number,
): (string | undefined)[] {
  if (domains.length === 0) return Array.from({ length: count }, () => undefined);
  const counts = new Map(domains.map((d) => [d, 0]));
  for (const d of existing) if (d !== undefined && counts.has(d)) counts.set(d, (counts.get(d) ?? 0) + 1);
  const placed: string[] = [];
  for (let i = 0; i < count; i++) {
    let best = domains[0] ?? '';
    for (const d of domains) if ((counts.get(d) ?? 0) < (counts.get(best) ?? 0)) best = d;
    counts.set(best, (counts.get(best) ?? 0) + 1);
    placed.push(best);
  }
  return placed;
}

/** The failure domains holding the most of these machines (scale down takes from the most crowded). */
export function mostCrowdedDomains(machineDomains: readonly (string | undefined)[]): Set<string | undefined> {
  const counts = new Map<string | undefined, number>();
  for (const d of machineDomains) counts.set(d, (counts.get(d) ?? 0) + 1);
  const max = Math.max(0, ...counts.values());
  return new Set([...counts].filter(([, n]) => n === max).map(([d]) => d));
}

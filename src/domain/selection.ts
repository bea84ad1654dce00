import { mostCrowdedDomains } from './failure-domains.ts';

/** What victim selection needs to know of a machine; kept minimal so the rule is testable alone. */
export interface VictimCandidate {
  name: string;
  ordinal: number;
  createdAt: number;
  failureDomain?: string;
  /** Not yet an etcd member: deleting it needs no membership change at all. */
  notMember: boolean;
  unhealthy: boolean;
  outdated: boolean;
}

function rank(c: VictimCandidate): number {
  if (c.notMember) return 0;
  if (c.unhealthy) return 1;
  if (c.outdated) return 2;
  return 3;
}

/**
 * Picks `count` machines to remove: non-members first (cheapest), then unhealthy, then outdated, then
 * from the most crowded failure domain, then the oldest. Domain counts are updated after each pick so
 * a multi-machine scale down keeps the spread.
 */
export function selectVictims(candidates: readonly VictimCandidate[], count: number): VictimCandidate[] {
  const remaining = [...candidates];
  const picked: VictimCandidate[] = [];
  while (picked.length < count && remaining.length > 0) {
    const bestRank = Math.min(...remaining.map(rank));
    const tier = remaining.filter((c) => rank(c) === bestRank);
    const crowded = mostCrowdedDomains(remaining.map((c) => c.failureDomain));
    const inCrowded = tier.filter((c) => crowded.has(c.failureDomain));
    const pool = inCrowded.length > 0 ? inCrowded : tier;
    const oldest = [...pool].sort((a, b) => a.createdAt - b.createdAt || a.ordinal - b.ordinal)[0];
    if (!oldest) break;
    picked.push(oldest);
    remaining.splice(remaining.indexOf(oldest), 1);
  }
  return picked;
}

import { compareVersions } from './versions.ts';

/**
 * The newest patch of each minor that `scripts/install-etcd.sh` provides: where a cluster goes first
 * when the upgrade guide asks for a newer patch before the next minor.
 */
export const NEWEST_PATCH: Readonly<Record<string, string>> = { '3.4': '3.4.23', '3.5': '3.5.36', '3.6': '3.6.17', '3.7': '3.7.4' };

/**
 * The lowest patch a minor's members must run before the next minor (etcd's upgrade guides):
 * 3.5.1 to 3.5.19 did not persist learner promotions, and such a cluster fails its 3.6 upgrade with
 * "too many learner members" ("Upgrade etcd from v3.5 to v3.6": 3.5.20 or later first). A rolling
 * replacement, fastplane's way, can carry the wrong membership on in a snapshot to 3.5.20-3.5.23
 * members too; etcd's follow-up asks for 3.5.24 or later (etcd issue 20793).
 */
const MINIMUM_BEFORE_NEXT_MINOR: Readonly<Record<string, string>> = { '3.5': '3.5.24' };

export function minorOf(version: string): string {
  let minor = minorsOf.get(version);
  if (minor === undefined) {
    minor = version.split('.').slice(0, 2).join('.');
    if (minorsOf.size >= 1024) minorsOf.clear();
    minorsOf.set(version, minor);
  }
  return minor;
}

/** Minors already cut: the planner asks for the same few versions' minors many times per pass. */
const minorsOf = new Map<string, string>();

function nextMinor(minor: string): string {
  const [major = '3', m = '0'] = minor.split('.');
  return `${major}.${String(Number(m) + 1)}`;
}

export interface VersionStep {
  /** What new machines get now. */
  version: string;
  /** Set when `version` is a hop on the way to the target, with why. */
  hop?: string;
}

/**
 * The version a rollout to `target` rolls to next, given what the members run: the target, unless a
 * member of the minor below runs a patch the guide says must be left first; then that minor's newest
 * patch, and the target once every member of it runs at least the required patch.
 */
export function versionStep(running: readonly string[], target: string): VersionStep {
  const below = [...new Set(running.map(minorOf))].find((minor) => nextMinor(minor) === minorOf(target));
  if (below === undefined) return { version: target };
  const minimum = MINIMUM_BEFORE_NEXT_MINOR[below];
  const hopTo = NEWEST_PATCH[below];
  if (minimum === undefined || hopTo === undefined) return { version: target };
  const lagging = running.filter((v) => minorOf(v) === below && compareVersions(v, minimum) < 0);
  if (lagging.length === 0) return { version: target };
  return {
    version: hopTo,
    hop: `rolling to ${hopTo} first: etcd's upgrade guide asks every ${below} member to run ${minimum} or later before ${minorOf(target)} (older ${below} patches did not persist learner promotions); then on to ${target}`,
  };
}

/** The rollouts a change of version takes, one per minor, each minor's newest patch on the way. */
export function upgradePath(from: string, to: string): string[] {
  const path = [from];
  let minor = minorOf(from);
  while (compareVersions(minor, minorOf(to)) < 0) {
    const next = nextMinor(minor);
    const hop = versionStep([path.at(-1) ?? from], NEWEST_PATCH[next] ?? to).hop === undefined ? undefined : NEWEST_PATCH[minor];
    if (hop !== undefined && hop !== path.at(-1)) path.push(hop);
    path.push(next === minorOf(to) ? to : (NEWEST_PATCH[next] ?? `${next}.x`));
    minor = next;
  }
  return path;
}

/**
 * The lowest minor etcd can be downgraded from by its own protocol (`etcdctl downgrade validate` /
 * `enable`, then each member restarted in place on the lower binary): 3.6 and later, one minor down.
 */
export const DOWNGRADE_PROTOCOL_FROM = '3.6';

export interface Downgrade {
  /** The minor the members run now. */
  from: string;
  /** The minor they go down to. */
  to: string;
}

/**
 * A change from `from` to `to` down one minor that etcd's downgrade protocol covers (3.7 -> 3.6,
 * 3.6 -> 3.5); undefined for any other change, including a downgrade etcd has no protocol for.
 */
export function protocolDowngrade(from: string, to: string): Downgrade | undefined {
  const fromMinor = minorOf(from);
  const toMinor = minorOf(to);
  if (nextMinor(toMinor) !== fromMinor || compareVersions(fromMinor, DOWNGRADE_PROTOCOL_FROM) < 0) return undefined;
  return { from: fromMinor, to: toMinor };
}

export interface PendingDowngrade extends Downgrade {
  /** The highest version a machine runs: what a machine created meanwhile gets (a lower one cannot join). */
  running: string;
  /** The spec's version, which each member is restarted on. */
  target: string;
}

/**
 * The downgrade a cluster is in while its spec names a lower minor than some machines run: the highest
 * minor on record down to the spec's, when etcd's protocol covers it (the CLI refuses the rest).
 */
export function pendingDowngrade(running: readonly string[], target: string): PendingDowngrade | undefined {
  const above = running.filter((v) => compareVersions(minorOf(v), minorOf(target)) > 0);
  if (above.length === 0) return undefined;
  const highest = above.reduce((a, b) => (compareVersions(a, b) >= 0 ? a : b));
  const downgrade = protocolDowngrade(highest, target);
  return downgrade && { ...downgrade, running: highest, target };
}

/** A machine a downgrade keeps (its member is restarted in place, or already was): it runs one of the two minors. */
export function keptByDowngrade(downgrade: Downgrade, version: string): boolean {
  return minorOf(version) === downgrade.from || minorOf(version) === downgrade.to;
}

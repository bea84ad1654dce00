import { NEWEST_PATCH, protocolDowngrade, upgradePath } from './version-path.ts';

/**
 * etcd supports upgrading one minor version at a time, and going down one minor only by its downgrade
 * protocol, which exists from 3.6 on (3.5 and 3.4 have none; a 3.4 member exits on data written by
 * 3.5). A rollout that breaks a rule never converges: each new member exits and is replaced, until the
 * addresses run out. Patch releases of one minor share a storage format, so a patch change either way
 * is a plain rollout.
 */

function minorOf(version: string): { major: number; minor: number } {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return { major, minor };
}

function ruleBroken(from: string, to: string): string | undefined {
  const a = minorOf(from);
  const b = minorOf(to);
  if (a.major !== b.major) return `cannot change the major version (${from} -> ${to})`;
  if (b.minor < a.minor && protocolDowngrade(from, to) === undefined) return downgradeRefused(from, to, a, b);
  if (b.minor > a.minor + 1) return `cannot skip a minor version (${from} -> ${to}); etcd's path is ${upgradePath(from, to).join(' -> ')}, one rollout per minor: upgrade to ${String(a.major)}.${String(a.minor + 1)} first`;
  return undefined;
}

/** Why a downgrade etcd's protocol does not cover is refused, with the path it would take where there is one. */
function downgradeRefused(from: string, to: string, a: { major: number; minor: number }, b: { major: number; minor: number }): string {
  const path = [from];
  for (let minor = a.minor - 1; minor > b.minor; minor--) path.push(NEWEST_PATCH[`${String(a.major)}.${String(minor)}`] ?? `${String(a.major)}.${String(minor)}.x`);
  path.push(to);
  const covered = path.every((v, i) => i === 0 || protocolDowngrade(path[i - 1] ?? v, v) !== undefined);
  if (covered) return `cannot skip a minor version going down (${from} -> ${to}); etcd's downgrade path is ${path.join(' -> ')}, one downgrade per minor: downgrade to ${String(a.major)}.${String(a.minor - 1)} first`;
  return `cannot go down to an older minor version (${from} -> ${to}): etcd's downgrade protocol goes one minor down from 3.6 or later (3.7 -> 3.6, 3.6 -> 3.5); otherwise only patch releases of ${String(a.major)}.${String(a.minor)} may go down`;
}

/**
 * Whether `to` may replace the stored spec version `from`: the message for `spec.version` when it may
 * not, undefined when it may. `running` are the versions of the cluster's current machines: during a
 * rollout some still run an older minor, and the new version must not skip past them either.
 */
export function validateVersionChange(from: string, to: string, running: readonly string[] = []): string | undefined {
  const stored = ruleBroken(from, to);
  if (stored !== undefined) return `spec.version: ${stored}`;
  for (const current of running) {
    const broken = ruleBroken(current, to);
    if (broken !== undefined) return `spec.version: a machine still runs ${current} (a rollout is in progress): ${broken}`;
  }
  return undefined;
}

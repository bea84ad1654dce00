import { readFileSync, readlinkSync } from 'node:fs';
import type { ProcessIdentity } from '../../ports/state-store.ts';
import { statFields } from './process-status.ts';

/**
 * Who holds a lease or a lock, told apart from every other process: on this host only, and only when
 * /proc is this process's own (see ProcessIdentity in the state-store port). Everything else, another
 * host, another container, a holder that recorded no identity, is never proven gone: its lease or lock
 * is waited out instead.
 */

function readText(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** This boot of this kernel; undefined without /proc. */
export function bootId(): string | undefined {
  return readText('/proc/sys/kernel/random/boot_id') || undefined;
}

/** Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot; undefined once it is gone. */
export function processStartTime(pid: number): number | undefined {
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  const value = Number(statFields(`/proc/${String(pid)}/stat`)?.[22 - 3]);
  return Number.isInteger(value) ? value : undefined;
}

function readIdentity(): ProcessIdentity | undefined {
  try {
    // A /proc of another PID namespace (a container given the host's) names this process otherwise,
    // and would answer for the wrong processes.
    if (readlinkSync('/proc/self') !== String(process.pid)) return undefined;
    const boot = bootId();
    const startTime = processStartTime(process.pid);
    if (boot === undefined || startTime === undefined) return undefined;
    return { bootId: boot, pidNamespace: readlinkSync('/proc/self/ns/pid'), pid: process.pid, startTime };
  } catch {
    return undefined;
  }
}

/** None of it changes while the process runs. */
let own: { identity: ProcessIdentity | undefined } | undefined;

/** This process as the kernel knows it; undefined where /proc cannot tell (then nobody can prove it gone). */
export function ownIdentity(): ProcessIdentity | undefined {
  own ??= { identity: readIdentity() };
  return own.identity && { ...own.identity };
}

/**
 * Whether `holder` is proven gone: it ran under this boot of this kernel, in this PID namespace, and
 * its PID is now free or names a process started at another time (the PID was reused). Not proven
 * (false) for a holder elsewhere, whatever host name it gave, or one that recorded no identity.
 */
export function isProvenGone(holder: ProcessIdentity | undefined): boolean {
  const self = ownIdentity();
  if (holder === undefined || self === undefined) return false;
  if (holder.bootId !== self.bootId || holder.pidNamespace !== self.pidNamespace) return false;
  return processStartTime(holder.pid) !== holder.startTime;
}

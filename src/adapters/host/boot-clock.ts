import { readFileSync } from 'node:fs';
import { bootId } from './process-identity.ts';

/**
 * The host's boot clock (CLOCK_BOOTTIME, as /proc/uptime gives it, to 10 ms), with the boot it counts
 * from: one clock for every process of this boot of this host. Unlike the wall clock it never jumps
 * (an NTP step, `date -s`) and no process can have its own idea of it (a process started under
 * `faketime` reads the real one). Undefined without /proc.
 */
export function bootClock(): { bootId: string; ms: number } | undefined {
  const boot = bootId();
  let seconds: number;
  try {
    seconds = Number(readFileSync('/proc/uptime', 'utf8').split(' ')[0]);
  } catch {
    return undefined;
  }
  return boot === undefined || !Number.isFinite(seconds) ? undefined : { bootId: boot, ms: Math.round(seconds * 1000) };
}

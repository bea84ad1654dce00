import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

let ticksPerSecond: number | null | undefined;

/** The kernel's clock ticks per second (`getconf CLK_TCK`), the unit of /proc's CPU times; null when unknown. */
function clockTicks(): number | null {
  if (ticksPerSecond === undefined) {
    try {
      const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
      ticksPerSecond = Number.isInteger(ticks) && ticks > 0 ? ticks : null;
    } catch {
      // No getconf: no CPU figures rather than a guessed unit.
      ticksPerSecond = null;
    }
  }
  return ticksPerSecond;
}

/**
 * The CPU a process has used so far, user and system (utime + stime of /proc/PID/stat, every thread
 * of the process counted, see proc_pid_stat(5)), in seconds; undefined when it is gone or unreadable.
 */
export function cpuSeconds(pid: number): number | undefined {
  const ticks = clockTicks();
  if (ticks === null) return undefined;
  try {
    const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses: count fields after its last ')'.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // Fields 14 and 15 of the line, so 11 and 12 after the name (the state is field 3).
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return Number.isFinite(utime) && Number.isFinite(stime) ? (utime + stime) / ticks : undefined;
  } catch {
    return undefined;
  }
}

import { readdirSync, readFileSync } from 'node:fs';

/**
 * Whether a process exists (a zombie included). EPERM means it exists but belongs to another user.
 * A pid that is not a positive integer names no single process (0 and negatives address process
 * groups), so it counts as gone.
 */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

/** The process's arguments; none once it is gone or exiting (its memory released), or a zombie. */
export function processArguments(pid: number): string[] {
  try {
    return readFileSync(`/proc/${String(pid)}/cmdline`, 'utf8').split('\0').filter((arg) => arg !== '');
  } catch {
    return [];
  }
}

/** PF_EXITING in /proc/PID/stat's flags: the task has begun to exit (a zombie keeps it). */
const PF_EXITING = 0x4;

/**
 * The fields of a /proc stat file (`/proc/PID/stat`, `/proc/PID/task/TID/stat`) from field 3 (the
 * state letter) on, so field N (as proc(5) counts) is at index N - 3; undefined once it is gone.
 */
export function statFields(path: string): string[] | undefined {
  try {
    const stat = readFileSync(path, 'utf8');
    // "pid (comm) state ppid ...": comm may hold spaces and ')', so fields start after the last ')'.
    return stat.slice(stat.lastIndexOf(')') + 2).trimEnd().split(' ');
  } catch {
    return undefined;
  }
}

/** State letter and flags of each thread of the process, from /proc; none once it is gone. */
function threads(pid: number): { state: string; flags: number }[] {
  let ids: string[];
  try {
    ids = readdirSync(`/proc/${String(pid)}/task`);
  } catch {
    return [];
  }
  return ids.flatMap((tid) => {
    const fields = statFields(`/proc/${String(pid)}/task/${tid}/stat`);
    // None when the thread ended while we looked.
    return fields ? [{ state: fields[0] ?? '', flags: Number(fields[6] ?? 0) }] : [];
  });
}

/**
 * Whether the process is on its way out but not done: some thread has begun to exit and not every
 * thread is a zombie yet. Its arguments vanish early, when its memory is released; its files and
 * sockets close later, just before it becomes a zombie, so its ports are free only once this is false.
 */
export function isExiting(pid: number): boolean {
  const all = threads(pid);
  return all.some((t) => (t.flags & PF_EXITING) !== 0) && all.some((t) => t.state !== 'Z' && t.state !== 'X');
}

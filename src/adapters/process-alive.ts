/**
 * Whether a lease holder's process still exists. EPERM means it exists but belongs to another user.
 * A pid that is not a positive integer names no single process (0 and negatives address process
 * groups), so such a holder counts as gone.
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

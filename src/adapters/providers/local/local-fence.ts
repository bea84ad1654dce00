import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { StaleFenceError, type Fence } from '../../../ports/machine-provider.ts';
import { withLock } from '../../state-files.ts';

/**
 * Runs the destructive `act` of a call under lease fence `fence` on a cluster's fence on this host
 * (`dir`): refused with StaleFenceError when a newer holder acted here, else the fence is raised to
 * `fence` and `act` runs, both under the fence's lock (`<dir>.lock`, held to the act's end). So a
 * newer holder's check waits for an act already let through (the ssh provider's `flock` around its
 * remote script, on this host), for up to DEPOSED_ACT_BOUND_MS: an act that outlasts it is stuck, and
 * its holder's lock is broken. No fence (a call outside any lease): nothing checked, no lock.
 */
export async function underFence<T>(dir: string, cluster: string, target: string, fence: Fence, act: () => Promise<T>): Promise<T> {
  if (fence === undefined) return act();
  await mkdir(dirname(dir), { recursive: true, mode: 0o700 });
  return withLock(
    `${dir}.lock`,
    async () => {
      await passFence(dir, cluster, target, fence);
      return act();
    },
    { fence, breakDeposedAfterMs: DEPOSED_ACT_BOUND_MS },
  );
}

/**
 * How long a newer holder waits for a deposed holder's act before it breaks that holder's lock: longer
 * than any act here runs (a stop's 10 s grace before SIGKILL), so only an act that is stuck, such as
 * one of a frozen process, is cut short (`down --force` on a frozen holder, a lease taken over).
 */
const DEPOSED_ACT_BOUND_MS = 15_000;

/**
 * The fence: the highest lease fence a destructive call has carried, as one empty file per number in
 * `dir`. Files are only ever added before an act, so it never goes down (rewriting one file could);
 * numbers below the one just passed are removed.
 */
async function passFence(dir: string, cluster: string, target: string, fence: number): Promise<void> {
  const seen = await highestFence(dir);
  if (seen > fence) throw new StaleFenceError(cluster, target, fence, seen);
  if (seen === fence) return;
  await mkdir(dir, { recursive: true, mode: 0o700 });
  await writeFile(join(dir, String(fence)), '');
  const lower = (await readdir(dir)).filter((name) => Number(name) < fence);
  await Promise.all(lower.map((name) => rm(join(dir, name), { force: true })));
}

async function highestFence(dir: string): Promise<number> {
  const names = await readdir(dir).catch(() => []);
  return Math.max(0, ...names.map(Number).filter(Number.isSafeInteger));
}

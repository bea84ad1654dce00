import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { StaleFenceError, type Fence } from '../../ports/machine-provider.ts';

/**
 * A cluster's fence on this host: the highest lease fence a destructive call has carried, as one empty
 * file per number in `dir`. Files are only ever added before an act, so two holders racing can never
 * lower it (rewriting one file could); numbers below the one just passed are removed.
 */
export async function passFence(dir: string, cluster: string, target: string, fence: Fence): Promise<void> {
  if (fence === undefined) return;
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

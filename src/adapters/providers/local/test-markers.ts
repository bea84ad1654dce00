import { existsSync, renameSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Test hook (honoured only with FASTPLANE_TEST_HOOKS=1, like `provisioning-failed`): an
 * `init-never-starts` file in a cluster's folder makes the next member that would bootstrap on an
 * empty data dir behave as an etcd that exits at once, on every start of that machine from then on.
 * The file is renamed to name that machine, so the machine picked next initializes normally.
 */
export function initStartSuppressed(clusterDir: string, machine: string): boolean {
  const stuck = join(clusterDir, `init-never-starts.${machine}`);
  if (existsSync(stuck)) return true;
  const marker = join(clusterDir, 'init-never-starts');
  if (!existsSync(marker)) return false;
  renameSync(marker, stuck);
  return true;
}

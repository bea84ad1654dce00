import { listBackups } from '../care/backup/backup-files.ts';
import type { ControlPlaneStatusDocument } from '../reconciler/status.ts';

/**
 * For `status --explain` of a cluster that lost quorum: when the stopped members cannot start again
 * (their disks are gone), waiting never ends; say which commands end it, with the latest backup.
 */
export async function recoveryHint(stateDir: string, doc: ControlPlaneStatusDocument): Promise<string[]> {
  if (!doc.status.waits.some((w) => w.code === 'QuorumLost')) return [];
  const latest = (await listBackups(stateDir, doc.name)).at(-1);
  return [
    `if the stopped members cannot start again (data lost), run fastplane recover ${doc.name} to see the survivors and the plan, then fastplane recover ${doc.name} --yes`,
    latest === undefined
      ? `no backup of ${doc.name} exists to restore from instead`
      : `or restore the latest backup (revision ${String(latest.revision)}, ${latest.takenAt}): fastplane restore ${doc.name} --from ${latest.file} --replace`,
  ].map((line) => `  hint: ${line}`);
}

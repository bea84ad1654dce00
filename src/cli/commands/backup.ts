import { BackupError } from '../../care/backup/take-backup.ts';
import type { Backup } from '../../care/backup/backup-files.ts';
import { backup as takeBackup } from '../../app/maintenance.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { tableOrJson } from '../render.ts';

/** A backup that could not be taken is an error line, not a stack: exit 3 when no member could serve it. */
export function backupFailed(name: string, error: BackupError): number {
  process.stderr.write(`error: backup of ${name} failed: ${error.message}\n`);
  return error.reason === 'NoHealthyMember' ? EXIT.blocked : EXIT.internal;
}

function describeBackup(backup: Backup): string {
  return `backup of ${backup.cluster}: ${backup.file}\n  revision ${String(backup.revision)}, ${String(backup.totalKeys)} keys, ${String(backup.size)} bytes, from ${backup.member} (etcd ${backup.etcdVersion}), sha256 ${backup.sha256}`;
}

/** `backup NAME`: one verified snapshot from a healthy member into the state dir's backups folder. */
export async function backupCommand(ctx: CliContext, name: string, flags: { output: string }): Promise<number> {
  const format = tableOrJson(flags.output);
  let backup: Backup;
  try {
    backup = await takeBackup(ctx, name);
  } catch (error) {
    if (error instanceof BackupError) return backupFailed(name, error);
    throw error;
  }
  process.stdout.write(`${format === 'json' ? JSON.stringify(backup, null, 2) : describeBackup(backup)}\n`);
  return EXIT.converged;
}

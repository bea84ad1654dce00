import { BackupError } from '../../care/backup/take-backup.ts';
import type { Backup } from '../../care/backup/backup-files.ts';
import { careFor } from '../care.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { tableOrJson } from '../render.ts';
import { storedManifest } from '../spec-flags.ts';

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
  const manifest = await storedManifest(ctx, name);
  let backup: Backup;
  try {
    backup = await careFor(ctx, manifest).backup();
  } catch (error) {
    if (error instanceof BackupError) return backupFailed(name, error);
    throw error;
  }
  ctx.log.info({ cluster: name, backup }, 'backup taken');
  process.stdout.write(`${format === 'json' ? JSON.stringify(backup, null, 2) : describeBackup(backup)}\n`);
  return EXIT.converged;
}

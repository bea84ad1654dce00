import { backupsOf } from '../../app/maintenance.ts';
import { backupsDir } from '../../care/backup/backup-files.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { tableOrJson } from '../render.ts';
import { renderTable } from '../table.ts';

/** `backups NAME`: the complete backups of a control plane, oldest first (also of one no longer on record). */
export async function backupsCommand(ctx: CliContext, name: string, flags: { output: string }): Promise<number> {
  const format = tableOrJson(flags.output);
  const backups = await backupsOf(ctx, name);
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(backups, null, 2)}\n`);
  } else if (backups.length === 0) {
    process.stdout.write(`no backups of ${name} in ${backupsDir(ctx.stateDir, name)}\n`);
  } else {
    const rows = backups.map((b) => [b.takenAt, String(b.revision), String(b.totalKeys), String(b.size), b.member, b.etcdVersion, b.file]);
    process.stdout.write(`${renderTable([['TAKEN', 'REVISION', 'KEYS', 'BYTES', 'MEMBER', 'VERSION', 'FILE'], ...rows])}\n`);
  }
  return EXIT.converged;
}

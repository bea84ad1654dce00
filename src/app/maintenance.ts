import type { Backup } from '../care/backup/backup-files.ts';
import { listBackups } from '../care/backup/backup-files.ts';
import type { MaintainReport } from '../care/maintain.ts';
import type { MaintainOptions } from '../ports/care.ts';
import { underClusterLease, type LeaseWork } from './lease.ts';
import { storedManifest } from './records.ts';
import type { Note, Runtime } from './runtime.ts';

/** Compaction, defragmentation and NOSPACE recovery, under the cluster's lease. */
export async function maintain(runtime: Runtime, name: string, options: MaintainOptions, onNote: Note): Promise<LeaseWork<MaintainReport>> {
  const care = runtime.care(await storedManifest(runtime, name));
  return underClusterLease(runtime, name, 'maintenance', (writer) => care.maintainReport(writer, options, onNote), onNote);
}

/** One verified snapshot from a healthy member into the state dir's backups folder (BackupError when none could be taken). */
export async function backup(runtime: Runtime, name: string): Promise<Backup> {
  const taken = await runtime.care(await storedManifest(runtime, name)).backup();
  runtime.log.info({ cluster: name, backup: taken }, 'backup taken');
  return taken;
}

/** The complete backups of a control plane, oldest first (also of one no longer on record). */
export function backupsOf(runtime: Runtime, name: string): Promise<Backup[]> {
  return listBackups(runtime.stateDir, name);
}

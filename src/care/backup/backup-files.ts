import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * Where backups live and what describes them: `<state dir>/backups/<cluster>/<UTC time>-rev<revision>.db`,
 * each with a JSON sidecar `<file>.json` written after the snapshot is verified, so a sidecar always
 * names a complete file.
 */
export interface BackupSidecar {
  cluster: string;
  /** etcd's cluster ID (decimal), as the member answered. */
  clusterId: string;
  /** Name and ID of the member the snapshot came from. */
  member: string;
  memberId: string;
  revision: number;
  raftIndex: number;
  /** Keys in bbolt as `snapshot status` counts them: every revision of every key, and etcd's own metadata. */
  totalKeys: number;
  /** Keys the store held at `revision` (a count-only range read): what a restore reads back. */
  liveKeys?: number;
  size: number;
  sha256: string;
  etcdVersion: string;
  /** ISO time the snapshot was taken. */
  takenAt: string;
}

/** A sidecar with the absolute path of its snapshot: what `backup -o json` and `backups -o json` print. */
export type Backup = BackupSidecar & { file: string };

export function backupsDir(stateDir: string, cluster: string): string {
  return join(stateDir, 'backups', cluster);
}

export function sidecarPath(file: string): string {
  return `${file}.json`;
}

/**
 * `20250101T093000.123Z-rev1234.db`: sorts by time, no character a shell or a file system minds, and
 * to the millisecond, so the backup `restore --replace` takes first never lands on the file it restores.
 */
export function backupFileName(takenAt: Date, revision: number): string {
  const stamp = takenAt.toISOString().replace(/[-:]/g, '');
  return `${stamp}-rev${String(revision)}.db`;
}

/** The sidecar next to a snapshot file, if there is one. */
export async function readSidecar(file: string): Promise<BackupSidecar | undefined> {
  const path = sidecarPath(file);
  if (!existsSync(path)) return undefined;
  return JSON.parse(await readFile(path, 'utf8')) as BackupSidecar;
}

/** Every complete backup of a cluster (a snapshot with its sidecar), oldest first. */
export async function listBackups(stateDir: string, cluster: string): Promise<Backup[]> {
  const dir = backupsDir(stateDir, cluster);
  if (!existsSync(dir)) return [];
  const files = (await readdir(dir)).filter((name) => name.endsWith('.db')).sort();
  const backups: Backup[] = [];
  for (const name of files) {
    const file = join(dir, name);
    const sidecar = await readSidecar(file);
    if (sidecar) backups.push({ ...sidecar, file });
  }
  return backups;
}

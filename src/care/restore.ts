import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { compareVersions, type ControlPlane } from '../api/control-plane.ts';
import { InvalidInputError } from '../api/errors.ts';
import { readSidecar, type Backup, type BackupSidecar } from './backup/backup-files.ts';
import type { SnapshotSource } from '../domain/machine.ts';
import type { SnapshotTools } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { ProcessIdentity, StateStore } from '../ports/state-store.ts';
import { underLease } from '../lease/under-lease.ts';
import { BlockedError } from './blocked-error.ts';

export interface CheckedSnapshot {
  source: SnapshotSource;
  /** The sidecar next to the file, when it was taken by `fastplane backup`. */
  sidecar?: BackupSidecar;
}

function minorOf(version: string): string {
  return version.split('.').slice(0, 2).join('.');
}

/**
 * The snapshot a restore would use, checked before anything changes: the file exists and, when a
 * sidecar lies next to it, has the sidecar's SHA-256. Every problem names `--from` and the file.
 */
export async function checkSnapshot(path: string, tools: Pick<SnapshotTools, 'sha256'>): Promise<CheckedSnapshot> {
  const file = resolve(path);
  if (!existsSync(file)) throw new InvalidInputError([`--from ${path}: no such file`]);
  if (!statSync(file).isFile()) throw new InvalidInputError([`--from ${path}: not a file`]);
  if (statSync(file).size === 0) throw new InvalidInputError([`--from ${path}: the file is empty, not an etcd snapshot`]);
  const sha256 = await tools.sha256(file);
  let sidecar: BackupSidecar | undefined;
  try {
    sidecar = await readSidecar(file);
  } catch (error) {
    throw new InvalidInputError([`--from ${path}: its sidecar ${file}.json is not valid JSON (${error instanceof Error ? error.message : String(error)})`]);
  }
  if (sidecar !== undefined && sidecar.sha256 !== sha256) {
    throw new InvalidInputError([`--from ${path}: sha256 ${sha256} does not match ${sidecar.sha256} in its sidecar ${file}.json; the file is damaged or not that backup`]);
  }
  return { source: { file, sha256 }, ...(sidecar === undefined ? {} : { sidecar }) };
}

/** A snapshot is restored by the same etcd minor version or a newer one (never downgraded). */
export function checkSnapshotVersion(snapshot: CheckedSnapshot, version: string): void {
  const from = snapshot.sidecar?.etcdVersion;
  if (from !== undefined && compareVersions(minorOf(from), minorOf(version)) > 0) {
    throw new InvalidInputError([`--from ${snapshot.source.file}: a snapshot of etcd ${from} cannot be restored into etcd ${version} (etcd does not downgrade); give --version ${from} or later`]);
  }
}

export interface RestoreDeps {
  store: StateStore;
  clock: Clock;
  /** This process's identity for the lease record (LeaseKeeperOptions.identity). */
  identity?: ProcessIdentity | undefined;
  /** `--replace`: backs the existing cluster up; throws when it cannot (then nothing is replaced). */
  backupExisting: () => Promise<Backup>;
  /** `--replace`: deletes the existing cluster under its lease; false when its holder kept the lease. */
  destroyExisting: () => Promise<boolean>;
  onNote: (text: string) => void;
}

/**
 * Records a new control plane whose first member restores `snapshot`: the spec, and on the record the
 * snapshot its init member starts from. The normal reconcile path then does the rest (the init machine
 * restores and starts, the others join as learners, as in any bring-up). An existing control plane of that
 * name is refused unless `replace`, which backs it up and deletes it first.
 */
export async function recordRestore(deps: RestoreDeps, manifest: ControlPlane, snapshot: CheckedSnapshot, replace: boolean): Promise<void> {
  const name = manifest.metadata.name;
  checkSnapshotVersion(snapshot, manifest.spec.version);
  if ((await deps.store.getControlPlane(name)) !== undefined) {
    if (!replace) throw new InvalidInputError([`control plane ${name} exists; restore builds a new cluster: give --replace to back ${name} up and replace it, or restore under another name`]);
    const backup = await deps.backupExisting();
    deps.onNote(`backed up ${name} before replacing it: ${backup.file}`);
    if (!(await deps.destroyExisting())) throw new BlockedError(`another fastplane process still reconciles ${name}; nothing was replaced`);
  }
  const marked = await underLease(deps.store, name, { clock: deps.clock, identity: deps.identity, waitMs: 0, force: false }, async (writer) => {
    // Under the lease, so no reconcile can initialise the cluster from an empty data dir first.
    const applied = await deps.store.applySpec(manifest, deps.clock.now());
    if (!applied.created) throw new BlockedError(`control plane ${name} was created by another command meanwhile; nothing was restored`);
    await writer.commit({ kind: 'PatchControlPlane', patch: { restoreFrom: snapshot.source } });
  });
  if (!marked.done) throw new BlockedError(`another fastplane process took the lease of ${name} first; nothing was restored`);
}

/** The restored cluster does not hold what its backup recorded. */
export class RestoreMismatchError extends Error {
  override readonly name = 'RestoreMismatchError';
}

/**
 * The proof a restore ends with: the keys the restored cluster holds at the backup's revision, read
 * back, against the count its sidecar recorded when the backup was taken. Returns the line to print;
 * throws RestoreMismatchError when they differ.
 */
export async function verifyRestore(snapshot: CheckedSnapshot, countKeys: (revision: number) => Promise<number>): Promise<string> {
  const sidecar = snapshot.sidecar;
  if (sidecar?.liveKeys === undefined) return `restored keys not checked: ${snapshot.source.file} has no recorded key count (taken before backups recorded one, or not by fastplane backup)`;
  const restored = await countKeys(sidecar.revision);
  if (restored !== sidecar.liveKeys) {
    throw new RestoreMismatchError(`the restored cluster holds ${String(restored)} keys at revision ${String(sidecar.revision)}, but the backup ${snapshot.source.file} recorded ${String(sidecar.liveKeys)}; do not use it as the restored cluster`);
  }
  return `restore verified: ${String(restored)} keys at revision ${String(sidecar.revision)}, as the backup recorded`;
}

import type { ControlPlane } from '../api/control-plane.ts';
import { BackupError } from '../care/backup/take-backup.ts';
import { BlockedError } from '../care/blocked-error.ts';
import { checkSnapshot, recordRestore, type CheckedSnapshot } from '../care/restore.ts';
import { systemClock } from '../ports/clock.ts';
import { storedManifest } from './records.ts';
import type { Note, Runtime } from './runtime.ts';
import { destroyUnderLease } from './teardown.ts';

/** How long `restore --replace` waits for a running reconcile of the old cluster to stop. */
const REPLACE_WAIT_MS = 30_000;

/** The snapshot file checked whole (its sidecar, its digest) before anything is decided from it. */
export function checkedSnapshot(runtime: Runtime, file: string): Promise<CheckedSnapshot> {
  return checkSnapshot(file, { sha256: (path) => runtime.sha256(path) });
}

/** How recording a restore ended: recorded, the old cluster's backup failed, or a safety gate refused. */
export type RestoreStart = { ok: true } | { ok: false; backupFailed: BackupError } | { ok: false; blocked: string };

/**
 * Records that `manifest` is to be built from `snapshot`; with `replace`, the control plane of that
 * name is backed up and deleted first. The normal reconcile then builds it.
 */
export async function startRestore(runtime: Runtime, manifest: ControlPlane, snapshot: CheckedSnapshot, replace: boolean, onNote: Note): Promise<RestoreStart> {
  const name = manifest.metadata.name;
  try {
    await recordRestore(
      {
        store: runtime.store,
        clock: systemClock,
        identity: runtime.identity,
        backupExisting: async () => runtime.care(await storedManifest(runtime, name)).backup(),
        destroyExisting: async () => destroyUnderLease(runtime, await storedManifest(runtime, name), { waitMs: REPLACE_WAIT_MS, force: false }, onNote),
        onNote,
      },
      manifest,
      snapshot,
      replace,
    );
  } catch (error) {
    if (error instanceof BackupError) return { ok: false, backupFailed: error };
    if (!(error instanceof BlockedError)) throw error;
    return { ok: false, blocked: error.message };
  }
  return { ok: true };
}

/** The proof a restore ends with: the keys read back against the backup's count (RestoreMismatchError). */
export function verifyRestored(runtime: Runtime, manifest: ControlPlane, snapshot: CheckedSnapshot): Promise<string> {
  return runtime.care(manifest).verifyRestore(snapshot);
}

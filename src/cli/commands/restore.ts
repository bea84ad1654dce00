import { InvalidInputError } from '../../api/errors.ts';
import { sha256OfFile } from '../../adapters/state-files.ts';
import { BackupError } from '../../care/backup/take-backup.ts';
import { BlockedError } from '../../care/blocked-error.ts';
import { checkSnapshot, recordRestore, RestoreMismatchError } from '../../care/restore.ts';
import { systemClock } from '../../ports/clock.ts';
import { careFor } from '../care.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { destroyUnderLease } from '../lease.ts';
import { reconcileAndReport } from '../reconcile.ts';
import { parseTimeout, resolveManifest, storedManifest, type RunFlags } from '../spec-flags.ts';
import { backupFailed } from './backup.ts';

export interface RestoreFlags extends RunFlags {
  from?: string;
  replicas?: string;
  version?: string;
  replace?: boolean;
}

/** `restore NAME --from FILE`: a control plane built from a snapshot, ending with the restored keys counted. */
export async function restoreCommand(ctx: CliContext, name: string, flags: RestoreFlags): Promise<number> {
  if (flags.from === undefined) throw new InvalidInputError(['--from: give the snapshot file to restore']);
  parseTimeout(flags.timeout);
  const snapshot = await checkSnapshot(flags.from, { sha256: sha256OfFile });
  // The snapshot's own version unless told otherwise: restored by the code that wrote it.
  const version = flags.version ?? snapshot.sidecar?.etcdVersion;
  const manifest = await resolveManifest(ctx, {
    name,
    ...(flags.replicas === undefined ? {} : { replicas: flags.replicas }),
    ...(version === undefined ? {} : { version }),
  });
  try {
    await recordRestore(
      {
        store: ctx.store,
        clock: systemClock,
        identity: ctx.identity,
        backupExisting: async () => careFor(ctx, await storedManifest(ctx, name)).backup(),
        destroyExisting: async () => destroyUnderLease(ctx, await storedManifest(ctx, name), { waitMs: 30_000, force: false }),
        onNote: (text) => process.stderr.write(`${text}\n`),
      },
      manifest,
      snapshot,
      flags.replace === true,
    );
  } catch (error) {
    if (error instanceof BackupError) return backupFailed(name, error);
    if (!(error instanceof BlockedError)) throw error;
    process.stderr.write(`error: ${error.message}\n`);
    return EXIT.blocked;
  }
  process.stderr.write(`restoring ${name} from ${snapshot.source.file} (sha256 ${snapshot.source.sha256})\n`);
  const code = await reconcileAndReport(ctx, manifest, flags);
  if (code !== EXIT.converged) return code;
  // Ends with the proof: the keys read back from the restored cluster against the backup's count.
  try {
    process.stderr.write(`${await careFor(ctx, manifest).verifyRestore(snapshot)}\n`);
    return EXIT.converged;
  } catch (error) {
    if (!(error instanceof RestoreMismatchError)) throw error;
    process.stderr.write(`error: restore of ${name} failed its check: ${error.message}\n`);
    return EXIT.internal;
  }
}

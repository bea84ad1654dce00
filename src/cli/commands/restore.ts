import { InvalidInputError } from '../../api/errors.ts';
import { checkedSnapshot, startRestore, verifyRestored } from '../../app/restore.ts';
import { RestoreMismatchError } from '../../care/restore.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { reconcileAndReport } from '../reconcile.ts';
import { noteOnStderr } from '../render.ts';
import { parseTimeout, resolveManifest, type RunFlags } from '../spec-flags.ts';
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
  const snapshot = await checkedSnapshot(ctx, flags.from);
  // The snapshot's own version unless told otherwise: restored by the code that wrote it.
  const version = flags.version ?? snapshot.sidecar?.etcdVersion;
  const manifest = await resolveManifest(ctx, {
    name,
    ...(flags.replicas === undefined ? {} : { replicas: flags.replicas }),
    ...(version === undefined ? {} : { version }),
  });
  const started = await startRestore(ctx, manifest, snapshot, flags.replace === true, noteOnStderr);
  if (!started.ok) {
    if ('backupFailed' in started) return backupFailed(name, started.backupFailed);
    process.stderr.write(`error: ${started.blocked}\n`);
    return EXIT.blocked;
  }
  process.stderr.write(`restoring ${name} from ${snapshot.source.file} (sha256 ${snapshot.source.sha256})\n`);
  const code = await reconcileAndReport(ctx, manifest, flags);
  if (code !== EXIT.converged) return code;
  // Ends with the proof: the keys read back from the restored cluster against the backup's count.
  try {
    process.stderr.write(`${await verifyRestored(ctx, manifest, snapshot)}\n`);
    return EXIT.converged;
  } catch (error) {
    if (!(error instanceof RestoreMismatchError)) throw error;
    process.stderr.write(`error: restore of ${name} failed its check: ${error.message}\n`);
    return EXIT.internal;
  }
}

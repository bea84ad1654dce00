import type { CliContext } from '../context.ts';
import { reconcileAndReport } from '../reconcile.ts';
import { storedManifest } from '../../app/records.ts';
import { resolveManifest, type RunFlags } from '../spec-flags.ts';

/** `rollout NAME --version V`: a new generation of a stored control plane on another etcd version. */
export async function rolloutCommand(ctx: CliContext, name: string, flags: RunFlags & { version: string; etcdBinaries?: string }): Promise<number> {
  await storedManifest(ctx, name);
  return reconcileAndReport(ctx, await resolveManifest(ctx, { name, version: flags.version, ...(flags.etcdBinaries === undefined ? {} : { etcdBinaries: flags.etcdBinaries }) }), flags);
}

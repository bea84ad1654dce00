import type { CliContext } from '../context.ts';
import { reconcileAndReport } from '../reconcile.ts';
import { storedManifest } from '../../app/records.ts';
import { resolveManifest, type RunFlags } from '../spec-flags.ts';

/** `scale NAME --replicas R`: a new generation of a stored control plane with R members. */
export async function scaleCommand(ctx: CliContext, name: string, flags: RunFlags & { replicas: string }): Promise<number> {
  await storedManifest(ctx, name);
  return reconcileAndReport(ctx, await resolveManifest(ctx, { name, replicas: flags.replicas }), flags);
}

import type { CliContext } from '../context.ts';
import { reconcileAndReport } from '../reconcile.ts';
import { resolveManifest, type RunFlags, type SpecFlags } from '../spec-flags.ts';

/** `up`: stores the spec from a file and flags, and reconciles until it converges. */
export async function upCommand(ctx: CliContext, flags: SpecFlags & RunFlags): Promise<number> {
  return reconcileAndReport(ctx, await resolveManifest(ctx, flags), flags);
}

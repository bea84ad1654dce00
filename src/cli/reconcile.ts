import type { ControlPlane } from '../api/control-plane.ts';
import { reconcileSpec } from '../app/reconcile.ts';
import type { Convergence } from '../reconciler/converge.ts';
import type { CliContext } from './context.ts';
import { EXIT } from './exit-codes.ts';
import { explain, parseOutput, render } from './render.ts';
import { parseTimeout, type RunFlags } from './spec-flags.ts';

// The rendering of a reconcile behind up, scale, rollout and restore: progress on stderr, the final
// status on stdout, the outcome as an exit code.

export const OUTCOME_EXIT: Record<Convergence['outcome'], number> = {
  Converged: EXIT.converged,
  Blocked: EXIT.blocked,
  DeadlineExceeded: EXIT.deadline,
  Superseded: EXIT.superseded,
  Stopped: EXIT.superseded,
  Deleted: EXIT.superseded,
  // Never final: a command whose lease was taken over follows the new holder.
  LeaseLost: EXIT.internal,
};

/** The reconcile of a spec with live progress on stderr (listr2, loaded only by the commands that reconcile). */
export async function reconcileWithProgress(ctx: CliContext, manifest: ControlPlane, timeoutMs: number): ReturnType<typeof reconcileSpec> {
  if (manifest.spec.provider.insecure) {
    process.stderr.write(`warning: control plane ${manifest.metadata.name} runs without TLS (spec.provider.insecure): anyone who can reach its addresses can read and change etcd; for debugging only\n`);
  }
  const { progressFor } = await import('./progress.ts');
  return reconcileSpec(ctx, manifest, timeoutMs, progressFor());
}

/** Applies the spec and reconciles until converged, blocked or the deadline; prints the final status. */
export async function reconcileAndReport(ctx: CliContext, manifest: ControlPlane, flags: RunFlags): Promise<number> {
  const format = parseOutput(flags.output);
  const timeoutMs = parseTimeout(flags.timeout);
  const name = manifest.metadata.name;
  const result = await reconcileWithProgress(ctx, manifest, timeoutMs);
  if (result.outcome === 'Superseded' || result.outcome === 'Stopped' || result.outcome === 'Deleted') {
    process.stderr.write(`${supersededMessage(name, result)}\n`);
    return OUTCOME_EXIT[result.outcome];
  }
  const doc = await result.finalStatus();
  process.stdout.write(`${render(doc, format)}\n`);
  if (result.outcome !== 'Converged') process.stderr.write(`${explain(doc)}\n`);
  return OUTCOME_EXIT[result.outcome];
}

function supersededMessage(name: string, result: Convergence): string {
  if (result.outcome === 'Superseded' && result.newer) {
    const changes = result.newer.changes.length > 0 ? result.newer.changes.join(', ') : 'no spec field';
    return `error: generation ${String(result.generation)} of ${name} was superseded by generation ${String(result.newer.generation)} (${changes}); the cluster now converges to that`;
  }
  if (result.outcome === 'Stopped') return `error: stopped before generation ${String(result.generation)} of ${name} converged: fastplane down asked this process to stop`;
  return `error: control plane ${name} was deleted (fastplane down) before generation ${String(result.generation)} converged`;
}

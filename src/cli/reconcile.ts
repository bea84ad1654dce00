import type { ControlPlane } from '../api/control-plane.ts';
import { InvalidInputError } from '../api/errors.ts';
import { systemClock } from '../ports/clock.ts';
import { convergeGeneration, type Convergence } from '../reconciler/converge.ts';
import type { CliContext } from './context.ts';
import { EXIT } from './exit-codes.ts';
import { destroyControlPlane } from './lease.ts';
import { explain, parseOutput, render } from './render.ts';
import { parseTimeout, type RunFlags } from './spec-flags.ts';
import { statusOf } from './status-document.ts';

// The one reconcile path behind up, scale, rollout, restore and bench: the spec stored, the cluster
// brought to it (or the lease holder followed), the final status printed, the outcome as an exit code.

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

/** How one reconcile of a spec ended, with wall-clock times for `bench`. */
export interface ReconcileRun extends Convergence {
  /** When the spec was applied (ms since the epoch). */
  startedAt: number;
}

/**
 * Stores the spec (a new generation when it changed) and brings the cluster to it: this process
 * reconciles when it can take the lease, else it follows the holder. The one reconcile path behind
 * up, scale, rollout and bench, so a benchmark measures exactly what users run.
 */
export async function reconcileManifest(ctx: CliContext, manifest: ControlPlane, timeoutMs: number): Promise<ReconcileRun> {
  const name = manifest.metadata.name;
  if (manifest.spec.provider.insecure) {
    process.stderr.write(`warning: control plane ${name} runs without TLS (spec.provider.insecure): anyone who can reach its addresses can read and change etcd; for debugging only\n`);
  }
  const startedAt = Date.now();
  const applied = await ctx.store.applySpec(manifest, startedAt);
  const generation = applied.record.generation;
  ctx.log.info({ cluster: name, generation, changed: applied.changed }, applied.changed ? `stored generation ${String(generation)}` : `spec unchanged at generation ${String(generation)}`);
  // listr2 is loaded by the commands that reconcile, not by every start.
  const { progressFor } = await import('./progress.ts');
  const progress = progressFor();
  const depsFor = await ctx.depsFor(manifest, (event) => {
    progress.onEvent(event);
  });
  const title = `Reconciling control plane ${name} generation ${String(generation)} (${String(manifest.spec.replicas)} replicas, etcd ${manifest.spec.version}, ${manifest.spec.scaleUp.strategy})`;
  const result = await progress.run(title, () =>
    convergeGeneration(manifest, generation, {
      store: ctx.store,
      clock: systemClock,
      deadline: startedAt + timeoutMs,
      leaseTtlMs: ctx.leaseTtlMs,
      identity: ctx.identity,
      depsFor,
      log: ctx.log,
      onPass: (pass) => {
        progress.onPass(pass);
      },
      onEvent: (event) => {
        progress.onEvent(event);
      },
      onNote: (text) => {
        ctx.log.info({ cluster: name }, text);
        progress.note(text);
      },
      // Bad input found while acting (a taken address): leave nothing behind for a new control plane.
      onFailureUnderLease: async (error, writer) => {
        if (error instanceof InvalidInputError && applied.created) await destroyControlPlane(ctx, manifest, writer);
      },
    }),
  );
  return { ...result, startedAt };
}

/** Applies the spec and reconciles until converged, blocked or the deadline; prints the final status. */
export async function reconcileAndReport(ctx: CliContext, manifest: ControlPlane, flags: RunFlags): Promise<number> {
  const format = parseOutput(flags.output);
  const timeoutMs = parseTimeout(flags.timeout);
  const name = manifest.metadata.name;
  const result = await reconcileManifest(ctx, manifest, timeoutMs);
  if (result.outcome === 'Superseded' || result.outcome === 'Stopped' || result.outcome === 'Deleted') {
    process.stderr.write(`${supersededMessage(name, result)}\n`);
    return OUTCOME_EXIT[result.outcome];
  }
  const doc = await statusOf(ctx, name);
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

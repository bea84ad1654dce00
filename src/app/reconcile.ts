import type { ControlPlane } from '../api/control-plane.ts';
import { InvalidInputError } from '../api/errors.ts';
import type { EventRecord } from '../domain/machine.ts';
import { systemClock } from '../ports/clock.ts';
import { convergeGeneration, type Convergence } from '../reconciler/converge.ts';
import type { PassReport } from '../reconciler/run.ts';
import type { ControlPlaneStatusDocument } from '../reconciler/status.ts';
import type { Runtime } from './runtime.ts';
import { statusAfter } from './status.ts';
import { destroyControlPlane } from './teardown.ts';

/** How a reconcile shows itself while it runs (the CLI's progress view; a benchmark's). */
export interface ReconcileProgress {
  onPass(pass: PassReport): void;
  onEvent(event: EventRecord): void;
  /** A line about the run itself (another process holds the lease, what it waits for). */
  note(text: string): void;
  /** Runs the whole reconcile under `title`. */
  run<T>(title: string, work: () => Promise<T>): Promise<T>;
}

/** How one reconcile of a spec ended, with wall-clock times for `bench`. */
export interface ReconcileRun extends Convergence {
  /** When the spec was applied (ms since the epoch). */
  startedAt: number;
  /** The control plane's status after the run (read when asked: a benchmark does not). */
  finalStatus(): Promise<ControlPlaneStatusDocument>;
}

/**
 * Stores the spec (a new generation when it changed) and brings the cluster to it: this process
 * reconciles when it can take the lease, else it follows the holder. The one reconcile path behind
 * up, scale, rollout, restore, recover and bench, so a benchmark measures exactly what users run.
 */
export async function reconcileSpec(runtime: Runtime, manifest: ControlPlane, timeoutMs: number, progress: ReconcileProgress): Promise<ReconcileRun> {
  const name = manifest.metadata.name;
  const startedAt = Date.now();
  const applied = await runtime.store.applySpec(manifest, startedAt);
  const generation = applied.record.generation;
  runtime.log.info({ cluster: name, generation, changed: applied.changed }, applied.changed ? `stored generation ${String(generation)}` : `spec unchanged at generation ${String(generation)}`);
  const ports = await runtime.clusterPorts(manifest);
  const depsFor = runtime.passDeps(ports, (event) => {
    progress.onEvent(event);
  });
  const title = `Reconciling control plane ${name} generation ${String(generation)} (${String(manifest.spec.replicas)} replicas, etcd ${manifest.spec.version}, ${manifest.spec.scaleUp.strategy})`;
  const result = await progress.run(title, () =>
    convergeGeneration(manifest, generation, {
      store: runtime.store,
      clock: systemClock,
      deadline: startedAt + timeoutMs,
      leaseTtlMs: runtime.leaseTtlMs,
      identity: runtime.identity,
      depsFor,
      log: runtime.log,
      onPass: (pass) => {
        progress.onPass(pass);
      },
      onEvent: (event) => {
        progress.onEvent(event);
      },
      onNote: (text) => {
        runtime.log.info({ cluster: name }, text);
        progress.note(text);
      },
      // Bad input found while acting (a taken address): leave nothing behind for a new control plane.
      onFailureUnderLease: async (error, writer) => {
        if (error instanceof InvalidInputError && applied.created) await destroyControlPlane(ports, writer);
      },
    }),
  );
  return { ...result, startedAt, finalStatus: () => statusAfter(ports, result) };
}

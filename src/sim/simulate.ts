import type { ControlPlane } from '../api/control-plane.ts';
import { MemoryStateStore } from '../adapters/memory-state-store.ts';
import { FailpointCrash, type FailpointName } from '../executor/failpoints.ts';
import type { ExecutorDeps } from '../executor/execute.ts';
import { applyControlPlane } from '../reconciler/apply.ts';
import { runUntilSettled, type RunOptions, type RunResult } from '../reconciler/run.ts';
import { ModelEtcdAdmin, ModelProvider } from './model-adapters.ts';
import { MEASURED_TIMINGS, ModelWorld, type ModelTimings } from './model-world.ts';
import { seededRandom } from './random.ts';
import { VirtualClock } from './virtual-clock.ts';

export interface SimulationOptions {
  seed: number;
  timings?: Partial<ModelTimings>;
  /** Whether a failpoint crashes the controller (called at every failpoint). */
  crashAt?: (name: FailpointName) => boolean;
}

/** A complete simulated world: model etcd and machines, a memory store and a virtual clock. */
export class Simulation {
  readonly clock = new VirtualClock(1_000_000);
  readonly random: () => number;
  readonly world: ModelWorld;
  readonly store = new MemoryStateStore({ isHolderAlive: () => false });
  readonly deps: ExecutorDeps;

  constructor(
    readonly manifest: ControlPlane,
    options: SimulationOptions,
  ) {
    this.random = seededRandom(options.seed);
    this.world = new ModelWorld(this.clock, this.random, { ...MEASURED_TIMINGS, ...options.timings });
    const crashAt = options.crashAt;
    this.deps = {
      cluster: manifest.metadata.name,
      etcd: new ModelEtcdAdmin(this.world),
      provider: new ModelProvider(this.world),
      store: this.store,
      clock: this.clock,
      failpoint: (name) => {
        if (crashAt?.(name)) throw new FailpointCrash(name);
      },
    };
    applyControlPlane(this.store, manifest, this.clock.now());
  }

  apply(manifest: ControlPlane): void {
    applyControlPlane(this.store, manifest, this.clock.now());
  }

  /** Runs the controller until settled; a simulated crash restarts it from the stored records only. */
  async run(timeoutMs: number, onPass?: RunOptions['onPass']): Promise<RunResult & { crashes: number }> {
    const deadline = this.clock.now() + timeoutMs;
    let crashes = 0;
    for (;;) {
      try {
        const options: RunOptions = { deadline, withoutLease: true, blockedGraceMs: 60_000 };
        if (onPass) options.onPass = onPass;
        return { ...(await runUntilSettled(this.deps, options)), crashes };
      } catch (error) {
        if (!(error instanceof FailpointCrash)) throw error;
        crashes++;
      }
    }
  }
}

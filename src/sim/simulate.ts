import type { ControlPlane } from '../api/control-plane.ts';
import { parseDurationRange } from '../api/duration.ts';
import { FailpointCrash, type FailpointName } from '../executor/failpoints.ts';
import type { ExecutorDeps } from '../executor/execute.ts';
import { FencedWriter } from '../lease/fenced-writer.ts';
import { runUntilSettled, type RunOptions, type RunResult } from '../reconciler/run.ts';
import { ModelEtcdAdmin, ModelProvider } from './model-adapters.ts';
import { MEASURED_TIMINGS, type ModelTimings } from './model-timings.ts';
import { ModelWorld } from './model-world.ts';
import { seededRandom } from './random.ts';
import { MemoryStateStore } from '../adapters/stores/memory-state-store.ts';
import type { Clock } from '../ports/clock.ts';
import { VirtualClock } from './virtual-clock.ts';

export interface SimulationOptions {
  seed: number;
  /** Model timings; provisioning and deletion default to the manifest's provider delays. */
  timings?: Partial<ModelTimings>;
  /** Whether a failpoint crashes the controller (called at every failpoint). */
  crashAt?: (name: FailpointName) => boolean;
  /** Virtual time from a crash to the restarted controller's first pass (default 1 s). */
  restartDelayMs?: number;
  /** Safety gate grace before a run ends as Blocked (default 60 s). */
  blockedGraceMs?: number;
  /**
   * Skip the controller's idle polls: a requeue that would wake before the model's next change wakes
   * at the first poll tick after it instead, exactly when the same poll loop would first see the
   * change. Only for fault-free runs (what-if timing): faults and planner deadlines are not model
   * changes, so runs with them must poll every tick.
   */
  fastForward?: boolean;
}

/** Passes in a row at one virtual instant before a run counts as a livelock. */
export const LIVELOCK_PASSES = 1000;

/** The controller loops without letting virtual time pass (a real controller would spin). */
export class SimulationLivelock extends Error {
  override readonly name = 'SimulationLivelock';
}

/**
 * Wraps a port so that every call made by a crashed controller incarnation throws: a crash stops the
 * process, so its in-flight chains (say, a machine creation running alongside the membership action
 * that hit the failpoint) get no further side effects. Calls already sent still land, as on real
 * infrastructure.
 */
function guarded<T extends object>(target: T, alive: () => boolean): T {
  return new Proxy(target, {
    get(object, key) {
      const value: unknown = Reflect.get(object, key);
      if (typeof value !== 'function') return value;
      const method = value as (...args: unknown[]) => unknown;
      return (...args: unknown[]): unknown => {
        if (!alive()) throw new FailpointCrash('the controller process is gone');
        return method.apply(object, args);
      };
    },
  });
}

/** A complete simulated world: model etcd and machines, an in-memory store and a virtual clock. */
export class Simulation {
  readonly clock = new VirtualClock(1_000_000);
  readonly random: () => number;
  readonly world: ModelWorld;
  readonly store = new MemoryStateStore();
  readonly cluster: string;
  /** Controller crashes so far (failpoints that fired). */
  crashes = 0;
  private incarnation = 0;
  private readonly crashAt: ((name: FailpointName) => boolean) | undefined;
  private readonly restartDelayMs: number;
  private readonly blockedGraceMs: number;
  private readonly controllerClock: Clock;
  /** The first spec, stored by the constructor; run() waits for it. */
  private readonly applied: Promise<unknown>;

  constructor(
    readonly manifest: ControlPlane,
    options: SimulationOptions,
  ) {
    this.random = seededRandom(options.seed);
    const { provider } = manifest.spec;
    const fromManifest: Partial<ModelTimings> = {};
    const provisioning = parseDurationRange(provider.provisioningDelay);
    const deletion = parseDurationRange(provider.deletionDelay);
    if (provisioning) fromManifest.provisioning = provisioning;
    if (deletion) fromManifest.deletion = deletion;
    this.world = new ModelWorld(this.clock, this.random, { ...MEASURED_TIMINGS, ...fromManifest, ...options.timings });
    this.cluster = manifest.metadata.name;
    this.crashAt = options.crashAt;
    this.restartDelayMs = options.restartDelayMs ?? 1000;
    this.blockedGraceMs = options.blockedGraceMs ?? 60_000;
    this.controllerClock = options.fastForward === true ? this.fastForwardClock() : this.clock;
    this.applied = this.store.applySpec(manifest, this.clock.now());
  }

  private fastForwardClock(): Clock {
    const { clock, world } = this;
    return {
      now: () => clock.now(),
      sleep: (ms) => {
        const now = clock.now();
        const next = ms > 0 ? world.nextChangeAfter(now) : undefined;
        if (next === undefined || next <= now + ms) return clock.sleep(ms);
        return clock.sleep(Math.ceil((next - now) / ms) * ms);
      },
    };
  }

  /** The ports as the current controller incarnation sees them (a crash retires the previous ones). */
  get deps(): ExecutorDeps {
    return this.depsFor(this.incarnation);
  }

  /** Ports for one controller incarnation: they stop working once that incarnation has crashed. */
  private depsFor(incarnation: number): ExecutorDeps {
    const alive = (): boolean => this.incarnation === incarnation;
    const store = guarded(this.store, alive);
    return {
      cluster: this.cluster,
      etcd: guarded(new ModelEtcdAdmin(this.world), alive),
      provider: guarded(new ModelProvider(this.world), alive),
      store,
      writer: new FencedWriter(store, { cluster: this.cluster, token: `controller-${String(incarnation)}` }),
      clock: this.controllerClock,
      failpoint: (name) => {
        if (!alive()) throw new FailpointCrash('the controller process is gone');
        if (this.crashAt?.(name)) {
          this.incarnation++;
          throw new FailpointCrash(name);
        }
      },
    };
  }

  /** Stores a new desired state, as `fastplane up -f` or `scale` would. */
  async apply(manifest: ControlPlane): Promise<void> {
    await this.store.applySpec(manifest, this.clock.now());
  }

  /**
   * Each controller incarnation takes the lease: the crashed one is gone for good, so the restarted
   * one takes it over at once, and a lease never expires on virtual time. Writes of a crashed
   * incarnation that still land are fenced out.
   */
  private async takeLease(incarnation: number): Promise<void> {
    const holder = { token: `controller-${String(incarnation)}`, holder: 'simulated controller', host: 'simulation', pid: incarnation, ttlMs: Number.MAX_SAFE_INTEGER };
    if (!(await this.store.acquireLease(this.cluster, holder, this.clock.now(), { force: true }))) throw new Error('the simulated controller could not take the lease');
  }

  /**
   * Runs the controller until settled; a simulated crash restarts it, after restartDelayMs, with
   * nothing but the stored records (its in-memory state, such as the last refused attempt, is gone).
   */
  async run(timeoutMs: number, onPass?: RunOptions['onPass']): Promise<RunResult & { crashes: number }> {
    const deadline = this.clock.now() + timeoutMs;
    let crashes = 0;
    let frozenAt = Number.NaN;
    let frozenPasses = 0;
    // A pass that acts requeues at once; if virtual time never moves again the run would never end.
    const watchedOnPass: NonNullable<RunOptions['onPass']> = (pass) => {
      frozenPasses = pass.now === frozenAt ? frozenPasses + 1 : 0;
      frozenAt = pass.now;
      if (frozenPasses >= LIVELOCK_PASSES) {
        const doing = [...pass.decision.machineActions.map((a) => a.kind), pass.decision.membershipAction?.kind ?? ''].filter(Boolean).join(', ');
        throw new SimulationLivelock(`${String(LIVELOCK_PASSES)} passes without virtual time moving (still deciding: ${doing || 'nothing'})`);
      }
      onPass?.(pass);
    };
    await this.applied;
    for (;;) {
      const deps = this.depsFor(this.incarnation);
      try {
        await this.takeLease(this.incarnation);
        const options: RunOptions = { deadline, blockedGraceMs: this.blockedGraceMs, onPass: watchedOnPass };
        return { ...(await runUntilSettled(deps, options)), crashes };
      } catch (error) {
        if (!(error instanceof FailpointCrash)) throw error;
        crashes++;
        this.crashes++;
        await this.clock.sleep(this.restartDelayMs);
      }
    }
  }
}

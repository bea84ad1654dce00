import type { ControlPlane } from '../api/control-plane.ts';
import type { EventRecord, MachinePhase } from '../domain/machine.ts';
import { FencedOutError, type ProcessIdentity, type SpecWatch, type StateStore } from '../ports/state-store.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { REQUEUE } from '../planner/requeue.ts';
import type { Clock } from '../ports/clock.ts';
import type { Logger } from '../ports/logger.ts';
import { LeaseKeeper } from '../lease/lease-keeper.ts';
import { CONTROLLERS_POOL } from '../reconciler/converge.ts';
import { freshMemory, nextPassAfter, reconcileOnce, type PassMemory, type PassResult, type ReconcileDeps } from '../reconciler/run.ts';
import type { ChangeResult, ControllerMetrics } from './controller-metrics.ts';
import { repeatOn, within, type Timers } from './timers.ts';
import { WorkQueue, type HandleResult } from './work-queue.ts';

export const CONTROLLER_LEASE_TTL_MS = 3_000;
/** After `down` asks this replica to give a cluster up, it leaves the cluster alone this long (or until a new generation). */
const STOP_HOLD_OFF_MS = 60_000;

const MEMBERSHIP_ACTIONS: ReadonlySet<string> = new Set(['InitCluster', 'AddLearner', 'StartMember', 'PromoteLearner', 'MoveLeader', 'RemoveMember']);
const RESULT_OF: Record<NonNullable<EventRecord['outcome']>, ChangeResult> = { Succeeded: 'ok', Refused: 'refused', Failed: 'failed' };

export interface ControllerOptions {
  store: StateStore;
  /** This replica's name in leases, logs and metrics. */
  id: string;
  clock: Clock;
  timers: Timers;
  maxConcurrentReconciles: number;
  leaseTtlMs?: number;
  /** How long a provider or membership call may take (the etcd client's timeout); default from the TTL. */
  callBoundMs?: number;
  /** This process's identity for the lease records (LeaseKeeperOptions.identity). */
  identity?: ProcessIdentity | undefined;
  /** A pass's ports under this replica's writer for the cluster; `notify` gets every recorded event. */
  depsFor: (manifest: ControlPlane, writer: FencedWriter, notify: (event: EventRecord) => void) => Promise<ReconcileDeps>;
  log?: Logger;
  metrics?: ControllerMetrics;
  /**
   * Simulations only: the delay a requeue really gets (a model knows when a cluster next changes by
   * itself, so polls before then could only repeat the previous decision). Default: as the planner asks.
   */
  requeueDelay?: (cluster: string, requeueAfterMs: number) => number;
}

/** What this replica keeps per cluster between passes. */
interface ClusterState {
  keeper?: LeaseKeeper | undefined;
  /** What the passes carry from one to the next, as the CLI's run keeps it (readings, last refusal, waits). */
  memory: PassMemory;
  /** The generation last seen, since when, and whether this replica saw it unconverged (time to ready). */
  generation?: { value: number; seenAt: number; sawUnconverged: boolean; reported: boolean };
  holdOff?: { until: number; generation: number } | undefined;
}

/**
 * Reconciles every control plane in the store, continuously and level-triggered: spec changes from
 * the store's watch and the planner's requeues feed one work queue; each cluster is reconciled by
 * the replica that holds its lease (leader election per cluster), one pass at a time, a bounded
 * number of clusters at once. Clock, timers and store are injected: the same loop runs in the CLI
 * and on virtual time.
 */
export class Controller {
  private readonly queue: WorkQueue;
  private readonly clusters = new Map<string, ClusterState>();
  private watch: SpecWatch | undefined;
  private stopping = false;
  private readonly ttlMs: number;
  private passes = 0;

  constructor(private readonly options: ControllerOptions) {
    this.ttlMs = options.leaseTtlMs ?? CONTROLLER_LEASE_TTL_MS;
    this.queue = new WorkQueue(
      {
        maxConcurrent: Math.max(1, options.maxConcurrentReconciles),
        timers: options.timers,
        handle: (cluster) => this.reconcile(cluster),
        onError: (cluster, error) => {
          options.log?.warn({ cluster, err: error instanceof Error ? error.message : String(error) }, `reconcile of ${cluster} failed: ${error instanceof Error ? error.message : String(error)}`);
        },
      },
      () => options.clock.now(),
    );
  }

  /** Passes run so far (benchmarks). */
  get passCount(): number {
    return this.passes;
  }

  /** Clusters this replica leads now. */
  get leading(): string[] {
    return [...this.clusters].filter(([, st]) => st.keeper !== undefined && !st.keeper.lost).map(([name]) => name);
  }

  /** Registers this replica (commands then leave new generations to the controllers) and starts watching. */
  async start(): Promise<void> {
    await this.options.store.claim(CONTROLLERS_POOL, this.options.id, this.options.id);
    this.watch = this.options.store.watchSpecs((cluster) => {
      this.queue.add(cluster);
    });
  }

  /**
   * Stops taking work, lets the passes in flight end (their membership calls are bounded by the
   * etcd client's timeout) for at most `passesBoundMs`, then releases every lease this replica holds
   * and its registration, for at most `releaseBoundMs`: a store that does not answer must not keep
   * the process from ending (its leases then expire after their TTL). True when everything was released.
   */
  async stop(passesBoundMs: number, releaseBoundMs = passesBoundMs): Promise<boolean> {
    this.stopping = true;
    const { store, timers, id, log } = this.options;
    // Not awaited before the passes end: closing a watch is itself a call to the store.
    const watchClosed = this.watch?.close() ?? Promise.resolve();
    await this.queue.shutdown(passesBoundMs);
    const release = Promise.all([
      watchClosed,
      ...[...this.clusters.keys()].map((cluster) => this.abdicate(cluster, 'shutting down')),
      store.releaseClaim(CONTROLLERS_POOL, id, id),
    ]).then(
      () => true,
      (error: unknown) => {
        log?.warn({ holder: id, err: error instanceof Error ? error.message : String(error) }, `releasing ${id}'s registration failed: ${error instanceof Error ? error.message : String(error)}`);
        return false;
      },
    );
    const released = await within(timers, releaseBoundMs, release);
    if (!released.done) {
      log?.warn({ holder: id, boundMs: releaseBoundMs }, `the store did not answer within ${String(releaseBoundMs)} ms while ${id} released its leases: they expire after their TTL (${String(this.ttlMs)} ms)`);
    }
    return released.done && released.value;
  }

  /** Ready when the store answers and every lease held is renewed in time. */
  async readiness(): Promise<string[]> {
    const problems: string[] = [];
    try {
      await this.options.store.getLease(`${this.options.id}/readyz`);
    } catch (error) {
      problems.push(`store unreachable: ${error instanceof Error ? error.message : String(error)}`);
    }
    for (const [cluster, st] of this.clusters) {
      if (st.keeper && !st.keeper.lost && !st.keeper.writer.leaseOutlives(0)) problems.push(`lease on ${cluster} not renewed in time`);
    }
    return problems;
  }

  private state(cluster: string): ClusterState {
    let st = this.clusters.get(cluster);
    if (!st) {
      st = { memory: freshMemory() };
      this.clusters.set(cluster, st);
    }
    return st;
  }

  private get retryLeadMs(): number {
    return Math.max(REQUEUE.retry, Math.floor(this.ttlMs / 3));
  }

  /** Takes the cluster's lease when free; undefined when another holder has it (or this replica holds off). */
  private async lead(cluster: string, st: ClusterState, generation: number): Promise<LeaseKeeper | undefined> {
    if (st.keeper && !st.keeper.lost) return st.keeper;
    if (st.keeper) await this.abdicate(cluster, 'lease lost');
    const now = this.options.clock.now();
    if (st.holdOff && st.holdOff.until > now && st.holdOff.generation === generation) return undefined;
    st.holdOff = undefined;
    const { store, clock, timers, log, id } = this.options;
    const keeper = await LeaseKeeper.acquire(store, cluster, {
      clock,
      ttlMs: this.ttlMs,
      holder: id,
      identity: this.options.identity,
      repeat: repeatOn(timers),
      ...(this.options.callBoundMs === undefined ? {} : { callBoundMs: this.options.callBoundMs }),
      ...(log === undefined ? {} : { log }),
      onChange: () => {
        this.queue.add(cluster);
      },
    });
    if (!keeper) return undefined;
    st.keeper = keeper;
    // A new term of leadership starts from what it observes, as a CLI run does.
    st.memory = freshMemory();
    this.options.metrics?.leader(cluster, true);
    return keeper;
  }

  private async abdicate(cluster: string, why: string): Promise<void> {
    const st = this.clusters.get(cluster);
    const keeper = st?.keeper;
    if (!st || !keeper) return;
    st.keeper = undefined;
    await keeper.release();
    this.options.metrics?.leader(cluster, false);
    this.options.log?.info({ cluster, holder: this.options.id, why }, `stopped leading ${cluster}: ${why}`);
  }

  private async forget(cluster: string): Promise<void> {
    await this.abdicate(cluster, 'deleted');
    this.clusters.delete(cluster);
    this.queue.forget(cluster);
    this.options.metrics?.forget(cluster);
  }

  /** One pass over a cluster, when this replica leads it. */
  private async reconcile(cluster: string): Promise<HandleResult> {
    if (this.stopping) return {};
    const { store, clock, log, metrics } = this.options;
    const cp = await store.getControlPlane(cluster);
    if (!cp) {
      await this.forget(cluster);
      return {};
    }
    const st = this.state(cluster);
    const now = clock.now();
    if (st.generation?.value !== cp.generation) {
      st.generation = { value: cp.generation, seenAt: now, sawUnconverged: false, reported: false };
      log?.info({ cluster, generation: cp.generation }, `generation ${String(cp.generation)} of ${cluster} noticed`);
    }
    const keeper = await this.lead(cluster, st, cp.generation);
    if (!keeper) return { requeueAfterMs: st.holdOff ? st.holdOff.until - now : this.retryLeadMs };
    if (keeper.stopRequested) {
      st.holdOff = { until: now + STOP_HOLD_OFF_MS, generation: cp.generation };
      await this.abdicate(cluster, 'asked to stop (fastplane down)');
      return { requeueAfterMs: STOP_HOLD_OFF_MS };
    }

    // Set by the executor's events during the pass.
    const outcomes = { refused: false, failed: false };
    const notify = (event: EventRecord): void => {
      if (event.outcome === 'Refused') outcomes.refused = true;
      if (event.outcome === 'Failed') outcomes.failed = true;
      if (event.action !== undefined && event.outcome !== undefined && MEMBERSHIP_ACTIONS.has(event.action)) metrics?.membershipChange(cluster, event.action, RESULT_OF[event.outcome]);
    };
    const deps = await this.options.depsFor(cp.manifest, keeper.writer, notify);
    const started = clock.now();
    let result: PassResult;
    try {
      result = await reconcileOnce(deps, st.memory);
    } catch (error) {
      if (!(error instanceof FencedOutError) && !keeper.lost) throw error;
      // Fenced out, or renewals too late to act safely: another replica (or command) may act now.
      await this.abdicate(cluster, error instanceof Error ? error.message : 'lease lost');
      return { requeueAfterMs: this.retryLeadMs };
    } finally {
      this.passes++;
      metrics?.reconcileDuration(cluster, (clock.now() - started) / 1000);
    }
    st.memory = result.memory;
    if (outcomes.refused && result.memory.attempt?.errorKind !== undefined) metrics?.etcdRefusal(cluster, result.memory.attempt.errorKind);
    this.report(cluster, st, result);
    if (keeper.lost) {
      await this.abdicate(cluster, 'lease lost');
      return { requeueAfterMs: this.retryLeadMs };
    }
    // After a refusal or failure, not at once again (the planner asks for a pass now when it acted),
    // and failures back off exponentially in the queue; a wait that does not move backs off too.
    const requeueAfterMs = nextPassAfter(result);
    return { requeueAfterMs: this.options.requeueDelay?.(cluster, requeueAfterMs) ?? requeueAfterMs, failed: outcomes.failed };
  }

  private report(cluster: string, st: ClusterState, result: PassResult): void {
    const { metrics, clock } = this.options;
    const { decision, observed } = result;
    const byPhase: Partial<Record<MachinePhase, number>> = {};
    for (const machine of observed.machines) byPhase[machine.record.phase] = (byPhase[machine.record.phase] ?? 0) + 1;
    metrics?.machines(cluster, byPhase);
    metrics?.controlPlaneReady(cluster, decision.conditions.some((c) => c.type === 'Available' && c.status === 'True'));
    const generation = st.generation;
    if (!generation || generation.value !== result.generation) return;
    if (!decision.converged) generation.sawUnconverged = true;
    else if (generation.sawUnconverged && !generation.reported) {
      generation.reported = true;
      metrics?.timeToReady((clock.now() - generation.seenAt) / 1000);
    }
  }
}

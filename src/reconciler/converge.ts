import { specDifferences } from '../domain/record-writes.ts';
import type { ControlPlane } from '../api/control-plane.ts';
import type { EventRecord } from '../domain/machine.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import type { Clock } from '../ports/clock.ts';
import type { Decision, Observed } from '../planner/types.ts';
import type { Logger } from '../ports/logger.ts';
import { FencedOutError, type ProcessIdentity, type StateStore } from '../ports/state-store.ts';
import { LeaseKeeper } from '../lease/lease-keeper.ts';
import { runUntilSettled, type PassReport, type ReconcileDeps, type RunOutcome } from './run.ts';

/** What a command that stored a generation learns about it. */
export interface Convergence {
  outcome: RunOutcome | 'Deleted';
  generation: number;
  /** For Superseded: the newer generation and what it changed. */
  newer?: { generation: number; changes: string[] };
  passes: number;
  /** When the last pass observed the result (ms since the epoch). */
  settledAt: number;
  /** The last pass's look when this process ran it (not when the outcome came from following another holder). */
  lastPass?: { observed: Observed; decision: Decision };
}

export interface ConvergeOptions {
  store: StateStore;
  clock: Clock;
  deadline: number;
  /** Dependencies of a run under the given writer (this process took the lease). */
  depsFor: (writer: FencedWriter) => ReconcileDeps;
  /** Lease changes and the run's outcome at info; each run's passes log through depsFor's logger. */
  log?: Logger;
  leaseTtlMs?: number;
  /** This process's identity for the lease record (LeaseKeeperOptions.identity). */
  identity?: ProcessIdentity | undefined;
  blockedGraceMs?: number;
  /** How long to leave a new generation to a registered controller (default 3 s). */
  controllerGraceMs?: number;
  onPass?: (pass: PassReport) => void;
  /** Progress of another holder while this process waits: its events and its waits. */
  onEvent?: (event: EventRecord) => void;
  onNote?: (text: string) => void;
  /** Runs under this process's lease before it is released, when the run ended (tear-down of a failed new cluster). */
  onFailureUnderLease?: (error: unknown, writer: FencedWriter) => Promise<void>;
}

const WAIT_POLL_MS = 250;

/** Claims pool in which each running `fastplane controller` registers its --id (claimed as itself). */
export const CONTROLLERS_POOL = 'controllers';
/** How long a command leaves a new generation to a registered controller before reconciling it itself. */
const CONTROLLER_GRACE_MS = 3_000;
const GRACE_POLL_MS = 100;

/**
 * When controllers are registered in the store, gives one of them the chance to take the cluster's
 * lease first (it sees a new generation within a second), so the command follows the controller
 * rather than racing it. A controller killed without releasing its registration costs this wait only.
 */
async function leaveToController(store: StateStore, clock: Clock, cluster: string, graceMs: number): Promise<void> {
  if ((await store.listClaims(CONTROLLERS_POOL)).length === 0) return;
  const until = clock.now() + graceMs;
  while (clock.now() < until && !(await store.getLease(cluster))) await clock.sleep(GRACE_POLL_MS);
}

/**
 * Brings the cluster to `generation` (already stored): reconciles it when no live process holds the
 * lease, otherwise waits for the holder, showing its progress, and takes over if it stops before the
 * work is done. Ends when that generation converged, a newer one superseded it, the deadline, or a
 * lasting block.
 */
export async function convergeGeneration(manifest: ControlPlane, generation: number, options: ConvergeOptions): Promise<Convergence> {
  const cluster = manifest.metadata.name;
  const { store, clock } = options;
  let passes = 0;
  let settledAt = clock.now();
  const watch = new HolderWatch(manifest, generation, options);
  await leaveToController(store, clock, cluster, options.controllerGraceMs ?? CONTROLLER_GRACE_MS);
  for (;;) {
    const keeper = await LeaseKeeper.acquire(store, cluster, {
      clock,
      identity: options.identity,
      ...(options.leaseTtlMs === undefined ? {} : { ttlMs: options.leaseTtlMs }),
      ...(options.log === undefined ? {} : { log: options.log }),
    });
    if (keeper) {
      try {
        const result = await runUntilSettled(options.depsFor(keeper.writer), {
          deadline: options.deadline,
          generation,
          stopRequested: () => keeper.stopRequested,
          ...(options.blockedGraceMs === undefined ? {} : { blockedGraceMs: options.blockedGraceMs }),
          onPass: (pass) => {
            settledAt = pass.now;
            options.onPass?.(pass);
          },
        });
        passes += result.passes;
        options.log?.info({ cluster, generation, outcome: result.outcome, passes: result.passes }, `run on generation ${String(generation)} ended: ${result.outcome}`);
        if (result.outcome === 'Superseded') return { ...(await superseded(store, manifest, generation)), passes, settledAt };
        if (result.outcome !== 'LeaseLost') return { outcome: result.outcome, generation, passes, settledAt, lastPass: { observed: result.observed, decision: result.decision } };
        options.onNote?.('another fastplane process took the lease over; following its work');
      } catch (error) {
        if (!keeper.lost && !(error instanceof FencedOutError)) {
          if (options.onFailureUnderLease) await options.onFailureUnderLease(error, keeper.writer);
          throw error;
        }
        // Fenced out mid-pass: deleted under this run (`down --force`) is an answer; otherwise another
        // process took the lease over (this one stalled past the TTL), so follow its work instead.
        if (!(await store.getControlPlane(cluster))) return { outcome: 'Deleted', generation, passes, settledAt };
        options.onNote?.('another fastplane process took the lease over; following its work');
      } finally {
        await keeper.release();
      }
    }
    const settled = await watch.step();
    if (settled) return { ...settled, passes, settledAt: clock.now() };
    await clock.sleep(WAIT_POLL_MS);
  }
}

async function superseded(store: StateStore, manifest: ControlPlane, generation: number): Promise<Pick<Convergence, 'outcome' | 'generation' | 'newer'>> {
  const cp = await store.getControlPlane(manifest.metadata.name);
  if (!cp) return { outcome: 'Deleted', generation };
  return { outcome: 'Superseded', generation, newer: { generation: cp.generation, changes: specDifferences(manifest.spec, cp.manifest.spec) } };
}

/** Follows another lease holder's work through the store: its events, its waits, how its passes end. */
class HolderWatch {
  private lastSeq: number | undefined;
  private lastNote = '';
  private blockedSince: number | undefined;

  constructor(
    private readonly manifest: ControlPlane,
    private readonly generation: number,
    private readonly options: ConvergeOptions,
  ) {}

  private async holder(): Promise<string> {
    return (await this.options.store.getLease(this.manifest.metadata.name))?.holder ?? 'another fastplane process';
  }

  /** One look: the outcome when this generation is settled, else undefined (keep waiting). */
  async step(): Promise<Pick<Convergence, 'outcome' | 'generation' | 'newer'> | undefined> {
    const { store, clock } = this.options;
    const cluster = this.manifest.metadata.name;
    const generation = this.generation;
    const cp = await store.getControlPlane(cluster);
    if (!cp) return { outcome: 'Deleted', generation };
    if (cp.generation > generation) return superseded(store, this.manifest, generation);
    const events = await store.listEvents(cluster, this.lastSeq ?? 0);
    // Events from before this command started are history, not progress.
    if (this.lastSeq !== undefined) for (const event of events) this.options.onEvent?.(event);
    this.lastSeq = events.at(-1)?.seq ?? this.lastSeq ?? 0;
    const pass = cp.lastPass?.generation === generation ? cp.lastPass : undefined;
    if (pass?.converged === true) {
      // Done before this command had said who was working: it still says who did the work.
      if (this.lastNote === '') this.options.onNote?.(`${await this.holder()} reconciled ${cluster} (generation ${String(generation)})`);
      return { outcome: 'Converged', generation };
    }
    const now = clock.now();
    this.blockedSince = pass?.blocked === true ? (this.blockedSince ?? now) : undefined;
    if (this.blockedSince !== undefined && now - this.blockedSince >= (this.options.blockedGraceMs ?? 15_000)) return { outcome: 'Blocked', generation };
    if (now >= this.options.deadline) return { outcome: pass?.blocked === true ? 'Blocked' : 'DeadlineExceeded', generation };
    const holder = await this.holder();
    const note = `${holder} is reconciling ${cluster} (generation ${String(generation)})${pass && pass.waits.length > 0 ? `; waiting: ${pass.waits.join('; ')}` : ''}`;
    if (note !== this.lastNote) this.options.onNote?.(note);
    this.lastNote = note;
    return undefined;
  }
}

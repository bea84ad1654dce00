import type { MachineRecord, StoredCondition } from '../domain/machine.ts';
import { execute, type ExecutorDeps } from '../executor/execute.ts';
import { planFromView } from '../planner/plan.ts';
import { FAST_RETRY, REQUEUE } from '../planner/requeue.ts';
import { buildView } from '../planner/view.ts';
import { toPlannerSpec } from '../planner/spec.ts';
import type { Decision, LastMembershipAttempt, Observed, VoterReading, Wait } from '../planner/types.ts';
import type { Logger } from '../ports/logger.ts';
import { observe } from '../cluster/observe.ts';
import { keepReadings, readingOf } from './readings.ts';
import { observationWrites } from './record.ts';
import { nextConditions } from './status.ts';

/**
 * Converged, Blocked and DeadlineExceeded judge the cluster; Superseded: a newer spec was stored
 * while this run worked; Stopped: another command asked the lease holder to stop (`down`); LeaseLost:
 * another process took the lease over, so this one stopped writing and acting.
 */
export type RunOutcome = 'Converged' | 'Blocked' | 'DeadlineExceeded' | 'Superseded' | 'Stopped' | 'LeaseLost';

export interface RunResult {
  outcome: RunOutcome;
  observed: Observed;
  decision: Decision;
  passes: number;
  /** The generation the last pass acted on. */
  generation: number;
}

export interface PassReport {
  observed: Observed;
  decision: Decision;
  changed: MachineRecord[];
  now: number;
  generation: number;
}

export interface RunOptions {
  /** Absolute time (clock ms) after which the run gives up. */
  deadline: number;
  /** A safety gate that stays closed this long ends the run as Blocked. */
  blockedGraceMs?: number;
  /** Called after every plan, before its actions run (progress, invariant checks in tests). */
  onPass?: (pass: PassReport) => void;
  /** The generation this run was started for: a newer one stored meanwhile ends it as Superseded. */
  generation?: number;
  /** Checked between passes: true ends the run as Stopped (the lease holder was asked to stop). */
  stopRequested?: () => boolean;
}

/** What a pass needs: the executor's ports, and optionally a logger (the CLI's; the simulator passes none). */
export type ReconcileDeps = ExecutorDeps & { log?: Logger };

/** Each pass's decision at debug: what it does, what it waits for and when it looks again. */
function logDecision(log: Logger | undefined, cluster: string, generation: number, decision: Decision): void {
  if (!log) return;
  const actions = decision.membershipAction ? [...decision.machineActions, decision.membershipAction] : decision.machineActions;
  log.debug(
    { cluster, generation, actions, waits: decision.waits, requeueAfterMs: decision.requeueAfterMs, converged: decision.converged, blocked: decision.blocked },
    `pass: ${String(actions.length)} action(s), ${String(decision.waits.length)} wait(s), requeue in ${String(decision.requeueAfterMs)}ms`,
  );
}

export const waitText = (wait: Wait): string => `${wait.code}: ${wait.message}`;

/** Waits that began or ended since the previous pass, at info: what an operator wants to see change. */
export function logWaitChanges(log: Logger | undefined, cluster: string, before: Wait[], after: Wait[]): void {
  if (!log) return;
  const was = new Set(before.map(waitText));
  const is = new Set(after.map(waitText));
  for (const wait of after) if (!was.has(waitText(wait))) log.info({ cluster, ...wait }, `waiting: ${waitText(wait)}`);
  for (const wait of before) if (!is.has(waitText(wait))) log.info({ cluster, ...wait }, `no longer waiting: ${waitText(wait)}`);
}

/**
 * What a loop keeps about a cluster from one pass to the next, besides the records: the last refused
 * membership change (explained next pass), the members' status readings (a guarded removal needs
 * readings spanning an election timeout), the waits (their changes are logged), and how many passes
 * in a row changed nothing (such a wait is looked at with backoff). The CLI's run and the controller
 * both hold one per cluster.
 */
export interface PassMemory {
  attempt?: LastMembershipAttempt | undefined;
  readings: VoterReading[];
  waits: Wait[];
  idlePasses: number;
}

export const freshMemory = (): PassMemory => ({ readings: [], waits: [], idlePasses: 0 });

/**
 * A fast wait (REQUEUE.fast: one expected to end within a few hundred ms) that stayed the same for
 * this many passes in a row is not ending soon: from then on it is looked at 2x, 4x ... less often,
 * up to IDLE_BACKOFF_MAX_MS apart.
 */
const IDLE_PASSES_BEFORE_BACKOFF = 20;
export const IDLE_BACKOFF_MAX_MS = 2_000;

export interface PassResult {
  observed: Observed;
  decision: Decision;
  /** The membership action or a machine action failed (or was refused). */
  failed: boolean;
  generation: number;
  memory: PassMemory;
}

const sameWaits = (a: readonly Wait[], b: readonly Wait[]): boolean => a.length === b.length && a.every((w, i) => b[i] !== undefined && waitText(w) === waitText(b[i]));

const sameConditions = (a: readonly StoredCondition[] | undefined, b: readonly StoredCondition[]): boolean =>
  a !== undefined && a.length === b.length && a.every((c, i) => JSON.stringify(c) === JSON.stringify(b[i]));

/** One pass: observe, plan, record (only what changed), execute. */
export async function reconcileOnce(deps: ReconcileDeps, memory: PassMemory = freshMemory(), onPass?: RunOptions['onPass']): Promise<PassResult> {
  const cp = await deps.store.getControlPlane(deps.cluster);
  if (!cp) throw new Error(`control plane ${deps.cluster} has no record`);
  const spec = toPlannerSpec(cp.manifest);
  const last = memory.attempt;
  const observed = await observe(deps, last, memory.readings);
  const now = deps.clock.now();
  const view = buildView(spec, observed, now);
  const decision = planFromView(view);
  const { writes, changed } = observationWrites(view, decision, cp);
  const waits = decision.waits.map(waitText);
  const conditions = nextConditions(cp.conditions, decision.conditions, now);
  const lastPass = { generation: cp.generation, at: now, converged: decision.converged, blocked: decision.blocked !== undefined, waits };
  const previous = cp.lastPass;
  // A pass that learned nothing new writes nothing: a wait that lasts must not rewrite the store every pass.
  const unchanged =
    writes.length === 0 &&
    cp.observedGeneration === cp.generation &&
    sameConditions(cp.conditions, conditions) &&
    previous !== undefined &&
    JSON.stringify({ ...previous, at: 0 }) === JSON.stringify({ ...lastPass, at: 0 });
  if (!unchanged) await deps.writer.commit(...writes, { kind: 'PatchControlPlane', patch: { conditions, observedGeneration: cp.generation, lastPass } });
  logDecision(deps.log, deps.cluster, cp.generation, decision);
  logWaitChanges(deps.log, deps.cluster, memory.waits, decision.waits);
  onPass?.({ observed, decision, changed, now, generation: cp.generation });
  const report = await execute(deps, observed, decision);
  const failed = report.membershipAttempt !== undefined || report.machineErrors.length > 0;
  const acted = decision.membershipAction !== undefined || decision.machineActions.length > 0 || (decision.careActions?.length ?? 0) > 0;
  const idle = !acted && !failed && sameWaits(memory.waits, decision.waits);
  return {
    observed,
    decision,
    failed,
    generation: cp.generation,
    memory: {
      // A refusal is remembered for the next plan only; success clears it.
      attempt: report.membershipAttempt ?? (decision.membershipAction ? undefined : last),
      // Taken before this pass's actions ran: a reading after a membership change shows it next pass.
      readings: keepReadings(memory.readings, readingOf(observed, now)),
      waits: decision.waits,
      idlePasses: idle ? memory.idlePasses + 1 : 0,
    },
  };
}

/**
 * When to look again after a pass: the planner's interval; after a failed action at least the retry
 * pause (refusals that lapse by themselves sooner); a fast wait that has not moved for many passes,
 * backing off, since polling it every 100 ms while nothing moves only costs etcd.
 */
export function nextPassAfter(result: PassResult): number {
  const { decision, memory } = result;
  if (result.failed) {
    const kind = memory.attempt?.errorKind;
    return Math.max(decision.requeueAfterMs, kind !== undefined && FAST_RETRY.has(kind) ? REQUEUE.fast : REQUEUE.retry);
  }
  if (decision.requeueAfterMs !== REQUEUE.fast || memory.idlePasses < IDLE_PASSES_BEFORE_BACKOFF) return decision.requeueAfterMs;
  return Math.min(IDLE_BACKOFF_MAX_MS, REQUEUE.fast * 2 ** Math.min(memory.idlePasses - IDLE_PASSES_BEFORE_BACKOFF + 1, 8));
}

/**
 * Level-triggered loop until converged, blocked for longer than the grace, the deadline, a newer
 * generation, or a stop request. The caller holds the cluster's lease (deps.writer is fenced by it).
 */
export async function runUntilSettled(deps: ReconcileDeps, options: RunOptions): Promise<RunResult> {
  let memory = freshMemory();
  let blockedSince: number | undefined;
  let passes = 0;
  for (;;) {
    const result = await reconcileOnce(deps, memory, options.onPass);
    passes++;
    memory = result.memory;
    const { decision, observed, generation } = result;
    const settled = (outcome: RunOutcome): RunResult => ({ outcome, observed, decision, passes, generation });
    const now = deps.clock.now();
    if (deps.writer.lost) return settled('LeaseLost');
    if (options.generation !== undefined && generation > options.generation) return settled('Superseded');
    if (decision.converged) return settled('Converged');
    if (options.stopRequested?.() === true) return settled('Stopped');
    blockedSince = decision.blocked ? (blockedSince ?? now) : undefined;
    if (blockedSince !== undefined && now - blockedSince >= (options.blockedGraceMs ?? 15_000)) return settled('Blocked');
    if (now >= options.deadline) return settled(decision.blocked ? 'Blocked' : 'DeadlineExceeded');
    await deps.clock.sleep(Math.min(nextPassAfter(result), Math.max(0, options.deadline - now)));
  }
}

import type { MachineRecord } from '../domain/machine.ts';
import { execute, type ExecutorDeps } from '../executor/execute.ts';
import { FAST_RETRY, planFromView, REQUEUE } from '../planner/plan.ts';
import { buildView } from '../planner/view.ts';
import { toPlannerSpec } from '../planner/spec.ts';
import type { Decision, LastMembershipAttempt, Observed, VoterReading, Wait } from '../planner/types.ts';
import type { Logger } from '../ports/logger.ts';
import { observe } from './observe.ts';
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

/** One pass: observe, plan, record, execute. Returns the decision and what the execution reported. */
export async function reconcileOnce(
  deps: ReconcileDeps,
  last: LastMembershipAttempt | undefined,
  onPass?: RunOptions['onPass'],
  readings: readonly VoterReading[] = [],
): Promise<{ observed: Observed; decision: Decision; attempt: LastMembershipAttempt | undefined; failed: boolean; generation: number; readings: VoterReading[] }> {
  const cp = await deps.store.getControlPlane(deps.cluster);
  if (!cp) throw new Error(`control plane ${deps.cluster} has no record`);
  const spec = toPlannerSpec(cp.manifest);
  const observed = await observe(deps, last, readings);
  const now = deps.clock.now();
  const view = buildView(spec, observed, now);
  const decision = planFromView(view);
  const { writes, changed } = observationWrites(view, decision, cp);
  const waits = decision.waits.map(waitText);
  await deps.writer.commit(...writes, {
    kind: 'PatchControlPlane',
    patch: {
      conditions: nextConditions(cp.conditions, decision.conditions, now),
      observedGeneration: cp.generation,
      lastPass: { generation: cp.generation, at: now, converged: decision.converged, blocked: decision.blocked !== undefined, waits },
    },
  });
  logDecision(deps.log, deps.cluster, cp.generation, decision);
  onPass?.({ observed, decision, changed, now, generation: cp.generation });
  const report = await execute(deps, observed, decision);
  // A refusal is remembered for the next plan only; success clears it.
  const attempt = report.membershipAttempt ?? (decision.membershipAction ? undefined : last);
  return {
    observed,
    decision,
    attempt,
    failed: report.membershipAttempt !== undefined || report.machineErrors.length > 0,
    generation: cp.generation,
    // Taken before this pass's actions ran: a reading after a membership change shows it next pass.
    readings: keepReadings(readings, readingOf(observed, now)),
  };
}

/**
 * Level-triggered loop until converged, blocked for longer than the grace, the deadline, a newer
 * generation, or a stop request. The caller holds the cluster's lease (deps.writer is fenced by it).
 */
export async function runUntilSettled(deps: ReconcileDeps, options: RunOptions): Promise<RunResult> {
  let attempt: LastMembershipAttempt | undefined;
  let readings: VoterReading[] = [];
  let waits: Wait[] = [];
  let blockedSince: number | undefined;
  let passes = 0;
  for (;;) {
    const result = await reconcileOnce(deps, attempt, options.onPass, readings);
    passes++;
    attempt = result.attempt;
    readings = result.readings;
    const { decision, observed, generation } = result;
    logWaitChanges(deps.log, deps.cluster, waits, decision.waits);
    waits = decision.waits;
    const settled = (outcome: RunOutcome): RunResult => ({ outcome, observed, decision, passes, generation });
    const now = deps.clock.now();
    if (deps.writer.lost) return settled('LeaseLost');
    if (options.generation !== undefined && generation > options.generation) return settled('Superseded');
    if (decision.converged) return settled('Converged');
    if (options.stopRequested?.() === true) return settled('Stopped');
    blockedSince = decision.blocked ? (blockedSince ?? now) : undefined;
    if (blockedSince !== undefined && now - blockedSince >= (options.blockedGraceMs ?? 15_000)) return settled('Blocked');
    if (now >= options.deadline) return settled(decision.blocked ? 'Blocked' : 'DeadlineExceeded');
    // After a failed action, back off before re-observing instead of hammering etcd or the provider.
    // Refusals that lapse by themselves (the 5 s rule, a learner just in sync) are tried again sooner.
    const backoff = result.attempt?.errorKind !== undefined && FAST_RETRY.has(result.attempt.errorKind) ? REQUEUE.fast : REQUEUE.retry;
    const pause = result.failed ? Math.max(decision.requeueAfterMs, backoff) : decision.requeueAfterMs;
    await deps.clock.sleep(Math.min(pause, Math.max(0, options.deadline - now)));
  }
}

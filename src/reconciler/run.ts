import { randomUUID } from 'node:crypto';
import type { MachineRecord } from '../domain/machine.ts';
import { execute, type ExecutorDeps } from '../executor/execute.ts';
import { planFromView, REQUEUE } from '../planner/plan.ts';
import { buildView } from '../planner/view.ts';
import { toPlannerSpec } from '../planner/spec.ts';
import type { Decision, LastMembershipAttempt, Observed } from '../planner/types.ts';
import { observe } from './observe.ts';
import { recordObservation } from './record.ts';
import { recordConditions } from './status.ts';

export type RunOutcome = 'Converged' | 'Blocked' | 'DeadlineExceeded';

export interface RunResult {
  outcome: RunOutcome;
  observed: Observed;
  decision: Decision;
  passes: number;
}

export interface RunOptions {
  /** Absolute time (clock ms) after which the run gives up. */
  deadline: number;
  /** A safety gate that stays closed this long ends the run as Blocked. */
  blockedGraceMs?: number;
  /** Called after every plan, before its actions run (progress, invariant checks in tests). */
  onPass?: (pass: { observed: Observed; decision: Decision; changed: MachineRecord[]; now: number }) => void;
  /** Skip the per-cluster lease (the simulator drives one controller). */
  withoutLease?: boolean;
}

export class LeaseHeldError extends Error {
  override readonly name = 'LeaseHeldError';
}

/** One pass: observe, plan, record, execute. Returns the decision and what the execution reported. */
export async function reconcileOnce(
  deps: ExecutorDeps,
  last: LastMembershipAttempt | undefined,
  onPass?: RunOptions['onPass'],
): Promise<{ observed: Observed; decision: Decision; attempt: LastMembershipAttempt | undefined; failed: boolean }> {
  const cp = deps.store.getControlPlane(deps.cluster);
  if (!cp) throw new Error(`control plane ${deps.cluster} has no record`);
  const spec = toPlannerSpec(cp.manifest);
  const observed = await observe(deps, last);
  const now = deps.clock.now();
  const view = buildView(spec, observed, now);
  const decision = planFromView(view);
  const changed = recordObservation(deps.store, deps.cluster, view, decision);
  recordConditions(deps.store, deps.cluster, decision.conditions, now);
  onPass?.({ observed, decision, changed, now });
  const report = await execute(deps, observed, decision);
  // A refusal is remembered for the next plan only; success clears it.
  const attempt = report.membershipAttempt ?? (decision.membershipAction ? undefined : last);
  return { observed, decision, attempt, failed: report.membershipAttempt !== undefined || report.machineErrors.length > 0 };
}

/** Level-triggered loop until converged, blocked for longer than the grace, or the deadline. */
export async function runUntilSettled(deps: ExecutorDeps, options: RunOptions): Promise<RunResult> {
  const token = randomUUID();
  if (!options.withoutLease && !deps.store.acquireLease(deps.cluster, { pid: process.pid, token })) {
    throw new LeaseHeldError(`another fastplane process is reconciling ${deps.cluster}; wait for it or stop it`);
  }
  try {
    let attempt: LastMembershipAttempt | undefined;
    let blockedSince: number | undefined;
    let passes = 0;
    for (;;) {
      const result = await reconcileOnce(deps, attempt, options.onPass);
      passes++;
      attempt = result.attempt;
      const { decision, observed } = result;
      const now = deps.clock.now();
      if (decision.converged) return { outcome: 'Converged', observed, decision, passes };
      blockedSince = decision.blocked ? (blockedSince ?? now) : undefined;
      if (blockedSince !== undefined && now - blockedSince >= (options.blockedGraceMs ?? 15_000)) return { outcome: 'Blocked', observed, decision, passes };
      if (now >= options.deadline) return { outcome: decision.blocked ? 'Blocked' : 'DeadlineExceeded', observed, decision, passes };
      // After a failed action, back off before re-observing instead of hammering etcd or the provider.
      const pause = result.failed ? Math.max(decision.requeueAfterMs, REQUEUE.retry) : decision.requeueAfterMs;
      await deps.clock.sleep(Math.min(pause, Math.max(0, options.deadline - now)));
    }
  } finally {
    if (!options.withoutLease) deps.store.releaseLease(deps.cluster, token);
  }
}

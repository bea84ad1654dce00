import type { Action, Decision, LastMembershipAttempt, Observed } from '../planner/types.ts';
import { EtcdAdminError } from '../ports/etcd-admin.ts';
import { RenewDeadlineHoldError } from '../lease/fenced-writer.ts';
import { emit, endsTheRun, machineOf, type ExecutionReport, type ExecutorDeps } from './executor-deps.ts';

export type { ExecutorDeps } from './executor-deps.ts';
import { resumeProvisioning, runMachineAction } from './machine-handlers.ts';
import { runMembershipAction } from './membership-handlers.ts';
import { runCareAction } from './care-handlers.ts';

function describeAction(action: Action): string {
  const machine = machineOf(action);
  if (action.kind === 'CreateMachine') return `${action.kind} ${action.machine} (etcd ${action.version})`;
  return machine === undefined ? action.kind : `${action.kind} ${machine}`;
}

/** etcd answers that say "not now": the planner waits and tries again; everything else failed. */
const REFUSALS: ReadonlySet<string> = new Set(['NotInSync', 'TooManyLearners', 'UnhealthyCluster', 'NotEnoughStartedMembers', 'PeerURLExists', 'BadLeaderTransferee', 'LearnerRpc']);

async function timed(deps: ExecutorDeps, action: Action, run: () => Promise<unknown>): Promise<string | undefined> {
  const at = deps.clock.now();
  const target = machineOf(action);
  const machine = target === undefined ? {} : { machine: target };
  try {
    const detail = await run();
    const said = typeof detail === 'string' && detail !== '' ? `: ${detail}` : '';
    await emit(deps, { at, endedAt: deps.clock.now(), type: 'Normal', reason: action.reason, action: action.kind, outcome: 'Succeeded', message: `${describeAction(action)} (${action.reason})${said}`, ...machine });
    return undefined;
  } catch (error) {
    // A simulated crash, a lost lease, or input the user must fix (a taken address): stop the run.
    if (endsTheRun(error)) throw error;
    const message = error instanceof Error ? error.message : String(error);
    const outcome = (error instanceof EtcdAdminError && REFUSALS.has(error.kind)) || error instanceof RenewDeadlineHoldError ? 'Refused' : 'Failed';
    await emit(deps, { at, endedAt: deps.clock.now(), type: 'Warning', reason: action.reason, action: action.kind, outcome, message: `${describeAction(action)} failed: ${message}`, ...machine });
    return message;
  }
}

/**
 * Runs one decision: machine actions in parallel, the single membership action alongside them. No
 * retry here: a failure is reported and the next pass re-observes before anything is tried again.
 * Every action is awaited to its end, whatever fails first, so nothing started is left unobserved
 * (a membership call still running while the caller tears down or exits).
 */
export async function execute(deps: ExecutorDeps, observed: Observed, decision: Decision): Promise<ExecutionReport> {
  const report: ExecutionReport = { machineErrors: [] };
  const membership = decision.membershipAction;
  const machineRuns = decision.machineActions.map(async (action) => {
    const error = await timed(deps, action, () => runMachineAction(deps, action));
    if (error !== undefined) report.machineErrors.push({ action, error });
  });
  const membershipRun = (async () => {
    if (!membership) return;
    let caught: unknown;
    const error = await timed(deps, membership, async () => {
      try {
        await runMembershipAction(deps, observed, membership);
      } catch (e) {
        caught = e;
        throw e;
      }
    });
    if (error === undefined) return;
    const attempt: LastMembershipAttempt = { action: membership.kind, target: machineOf(membership) ?? (membership.kind === 'RemoveMember' ? membership.memberId : ''), at: deps.clock.now(), error };
    if (caught instanceof EtcdAdminError) attempt.errorKind = caught.kind;
    report.membershipAttempt = attempt;
  })();
  // Care runs beside the rest: the planner asks for it only where it cannot collide (renewal on a
  // converged cluster, NOSPACE recovery with no membership change).
  const careRuns = (decision.careActions ?? []).map(async (action) => {
    await timed(deps, action, () => runCareAction(deps, action));
  });
  const settled = await Promise.allSettled([...machineRuns, ...resumeProvisioning(deps, observed, decision), membershipRun, ...careRuns]);
  const crash = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (crash) throw crash.reason;
  return report;
}

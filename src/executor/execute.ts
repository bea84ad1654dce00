import type { EventRecord } from '../domain/machine.ts';
import type { Action, Decision, LastMembershipAttempt, MachineAction, Observed } from '../planner/types.ts';
import { EtcdAdminError } from '../ports/etcd-admin.ts';
import { StaleFenceError } from '../ports/machine-provider.ts';
import { RenewDeadlineHoldError } from '../lease/fenced-writer.ts';
import { controlPlane, endsTheRun, type ExecutionReport, type ExecutorDeps } from './executor-deps.ts';

export type { ExecutorDeps } from './executor-deps.ts';
import { runMachineAction } from './machine-handlers.ts';
import { runMembershipAction } from './membership-handlers.ts';
import { runCareAction, STILL_RUNNING } from './care-handlers.ts';

async function emit(deps: ExecutorDeps, event: Omit<EventRecord, 'cluster'>): Promise<void> {
  const full: EventRecord = { cluster: deps.cluster, ...event };
  await deps.writer.commit({ kind: 'AppendEvent', event: full });
  deps.notify?.(full);
}

/** The machine an action concerns; a RemoveMember of an orphan member has none. */
function machineOf(action: Action): string | undefined {
  return 'machine' in action ? action.machine : undefined;
}

function describeAction(action: Action): string {
  const machine = machineOf(action);
  if (action.kind === 'CreateMachine') return `${action.kind} ${action.machine} (etcd ${action.version})`;
  return machine === undefined ? action.kind : `${action.kind} ${machine}`;
}

/** A machine that refused a call under this lease: no later side effect of this writer may run. */
function lostLeaseOn(deps: ExecutorDeps, error: unknown): unknown {
  if (error instanceof StaleFenceError) deps.writer.markLost(error);
  return error;
}

/** etcd answers that say "not now": the planner waits and tries again; everything else failed. */
const REFUSALS: ReadonlySet<string> = new Set(['NotInSync', 'TooManyLearners', 'UnhealthyCluster', 'NotEnoughStartedMembers', 'PeerURLExists', 'BadLeaderTransferee', 'LearnerRpc']);

/** Runs one action and records its event; a failure is returned (its message, and the error itself), never thrown, unless it ends the run. */
async function timed(deps: ExecutorDeps, action: Action, run: () => Promise<unknown>): Promise<{ message: string; error: unknown } | undefined> {
  const at = deps.clock.now();
  const target = machineOf(action);
  const machine = target === undefined ? {} : { machine: target };
  try {
    const detail = await run();
    if (detail === STILL_RUNNING) return undefined;
    const said = typeof detail === 'string' && detail !== '' ? `: ${detail}` : '';
    await emit(deps, { at, endedAt: deps.clock.now(), type: 'Normal', reason: action.reason, action: action.kind, outcome: 'Succeeded', message: `${describeAction(action)} (${action.reason})${said}`, ...machine });
    return undefined;
  } catch (error) {
    // A simulated crash, a lost lease, or input the user must fix (a taken address): stop the run.
    if (endsTheRun(error)) throw lostLeaseOn(deps, error);
    const message = error instanceof Error ? error.message : String(error);
    const outcome = (error instanceof EtcdAdminError && REFUSALS.has(error.kind)) || error instanceof RenewDeadlineHoldError ? 'Refused' : 'Failed';
    await emit(deps, { at, endedAt: deps.clock.now(), type: 'Warning', reason: action.reason, action: action.kind, outcome, message: `${describeAction(action)} failed: ${message}`, ...machine });
    return { message, error };
  }
}

/**
 * Provisioning goes on between passes: a machine still Provisioning that no action of this decision
 * concerns is moved on here (an ssh machine waiting for a host, or one a crash left half done), never
 * by describing it, which only reads. A failure to move it on is an event; the provider records a
 * provisioning failure on the machine itself, which the next pass sees as Failed.
 */
function resumeProvisioning(deps: ExecutorDeps, observed: Observed, decision: Decision): Promise<void>[] {
  const acted = new Set(decision.machineActions.map(machineOf));
  return observed.machines
    .filter((m) => m.infra?.state === 'Provisioning' && !acted.has(m.record.name))
    .map(async ({ record }) => {
      try {
        await deps.provider.provision(deps.cluster, record.name, deps.writer.fence);
      } catch (error) {
        if (endsTheRun(error)) throw lostLeaseOn(deps, error);
        const at = deps.clock.now();
        const message = `CreateMachine ${record.name} failed: ${error instanceof Error ? error.message : String(error)}`;
        await emit(deps, { at, endedAt: at, type: 'Warning', reason: 'ResumeCreate', action: 'CreateMachine', outcome: 'Failed', message, machine: record.name });
      }
    });
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
  // Read once, after the pass recorded what it observed: the actions' launches and templates come from it.
  const cp = await controlPlane(deps);
  // Care runs beside the rest: the planner asks for it only where it cannot collide (renewal on a
  // converged cluster, NOSPACE recovery with no membership change).
  const work: [Action, () => Promise<unknown>][] = [
    ...decision.machineActions.map((action): [Action, () => Promise<unknown>] => [action, () => runMachineAction(deps, cp, action)]),
    ...(membership ? [[membership, () => runMembershipAction(deps, cp, observed, membership)] satisfies [Action, () => Promise<unknown>]] : []),
    ...(decision.careActions ?? []).map((action): [Action, () => Promise<unknown>] => [action, () => runCareAction(deps, cp, action)]),
  ];
  const runs = work.map(async ([action, run]) => {
    const failed = await timed(deps, action, run);
    if (failed === undefined) return;
    if (action === membership) {
      const attempt: LastMembershipAttempt = { action: membership.kind, target: machineOf(membership) ?? (membership.kind === 'RemoveMember' ? membership.memberId : ''), at: deps.clock.now(), error: failed.message };
      if (failed.error instanceof EtcdAdminError) attempt.errorKind = failed.error.kind;
      report.membershipAttempt = attempt;
    } else if (isMachineAction(decision, action)) {
      report.machineErrors.push({ action, error: failed.message });
    }
  });
  const settled = await Promise.allSettled([...runs, ...resumeProvisioning(deps, observed, decision)]);
  const crash = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (crash) throw crash.reason;
  return report;
}

function isMachineAction(decision: Decision, action: Action): action is MachineAction {
  return (decision.machineActions as readonly Action[]).includes(action);
}

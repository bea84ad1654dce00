import { quorum } from '../domain/quorum.ts';
import { careJobBusy, planCare } from './care.ts';
import { planDowngrade, planPinnedVersion } from './downgrade.ts';
import { componentActions, componentsNotReady } from './components.ts';
import { conditionsFor } from './conditions.ts';
import { creations } from './creation.ts';
import { abandonInit } from './init-retry.ts';
import { isGone, isReadyVoter, nameOf, type Step } from './step.ts';
import type { Decision, MachineAction, MembershipAction, Observed, PlannerSpec } from './types.ts';
import { buildView, namesNoLeader, phaseOf, statusErrors, type ClusterView } from './view.ts';
import { requeueAfter } from './requeue.ts';
import { detectFailures } from './remediation.ts';
import { departures, requestDeletions, teardowns } from './scale-down.ts';
import { mayBootstrap, repair, restartDue, restartsWithoutQuorum, stoppedMembers } from './repair.ts';
import { initialize, promote, scaleUp } from './scale-up.ts';

/** The priority ladder: repair > remediation > rollout/scale down > scale up > promote. */
function membership(step: Step): MembershipAction | undefined {
  const { view } = step;
  const { observed } = view;
  if (observed.initMachine === undefined && view.membersKnown && view.members.length === 0) return initialize(step);
  if (!view.membersKnown) {
    const init = stoppedMembers(step).find((m) => mayBootstrap(view, m));
    if (init && restartDue(step, init)) return { kind: 'StartMember', machine: nameOf(init), initialClusterState: 'new', reason: 'RestartInitMember' };
    step.waits.push({ code: 'MemberListUnavailable', message: `cannot read the etcd member list: ${observed.members.ok ? '' : observed.members.error}` });
    return undefined;
  }
  if (!view.hasQuorum) {
    // A leader transfer or election leaves voters answering with no leader named for a moment; say so,
    // so that a brief Blocked (well inside the run's grace) does not read as members being down.
    const leaderless = view.voters.filter(namesNoLeader).length;
    const electing = leaderless === 0 ? '' : `; ${String(leaderless)} answer but name no leader (an election, or peers that cannot reach each other)`;
    step.blocked = {
      code: 'QuorumLost',
      message: `only ${String(view.healthyVoters.length)} of ${String(view.voters.length)} voters are healthy (quorum ${String(quorum(view.voters.length))})${electing}; membership cannot change`,
    };
    step.waits.push(step.blocked);
    return undefined;
  }
  return repair(step) ?? departures(step) ?? scaleUp(step) ?? promote(step);
}

function explainRefusal(step: Step, action: MembershipAction | undefined): void {
  const last = step.view.observed.lastMembershipAttempt;
  if (!action || !last?.errorKind || last.action !== action.kind) return;
  const why: Record<string, string> = {
    UnhealthyCluster: "etcd refused: leader not connected to every voter for 5 s yet (etcd's peer-connection rule); retrying",
    NotInSync: 'etcd says the learner is not in sync with the leader yet; retrying',
    TooManyLearners: 'etcd says the learner slot is taken; re-observing',
  };
  step.waits.push({ code: `Retry${last.errorKind}`, message: why[last.errorKind] ?? `last ${last.action} failed: ${last.error ?? last.errorKind}; retrying` });
}

function isConverged(step: Step, actions: number): boolean {
  const { view } = step;
  const { machines } = view.observed;
  const notReady = componentsNotReady(step);
  if (notReady.length > 0) step.waits.push({ code: 'ComponentsNotReady', message: `Kubernetes control plane not ready: ${notReady.join('; ')}` });
  return (
    actions === 0 &&
    notReady.length === 0 &&
    view.membersKnown &&
    view.voters.length === view.spec.replicas &&
    view.learners.length === 0 &&
    view.healthyVoters.length === view.voters.length &&
    view.voters.every((m) => statusErrors(m).length === 0) &&
    view.observed.alarms.length === 0 &&
    machines.length === view.spec.replicas &&
    machines.every((m) => !isGone(step, m) && !view.isOutdated(m) && isReadyVoter(view, m))
  );
}

/**
 * The whole decision procedure: pure, synchronous, deterministic. Any number of machine actions, at
 * most one membership action, and a reason for every action and every wait.
 */
export function plan(spec: PlannerSpec, observed: Observed, now: number): Decision {
  return planFromView(buildView(spec, observed, now));
}

/** plan() for a view the caller already built (the reconciler records from the same view). */
export function planFromView(view: ClusterView): Decision {
  const { observed } = view;
  const step: Step = {
    view,
    failed: new Set(observed.machines.filter((m) => m.record.failed).map(nameOf)),
    leaving: new Set(observed.machines.filter((m) => m.record.deleteRequested).map(nameOf)),
    waits: [],
  };
  // A step of the plan, not a hold-up: status shows where the rollout goes first, and why.
  if (view.versionHop !== undefined) step.waits.push({ code: 'UpgradeHop', message: view.versionHop });
  const machineActions: MachineAction[] = [...detectFailures(step), ...requestDeletions(step)];
  machineActions.push(...creations(step), ...teardowns(step), ...restartsWithoutQuorum(step), ...componentActions(step));
  const abandon = abandonInit(view);
  if (abandon) machineActions.push(abandon);
  const membershipAction = membership(step);
  explainRefusal(step, membershipAction);
  const actionCount = machineActions.length + (membershipAction ? 1 : 0);
  const settled = isConverged(step, actionCount);
  // A pending downgrade restarts every member: it runs once all else has settled, and until it is
  // done the cluster has not converged.
  const downgrade = planDowngrade(view, settled);
  const pinned = planPinnedVersion(view, settled);
  const converged = settled && view.downgrade === undefined && !pinned.pinned;
  // Care changes no membership and takes no machine: only a rolling job, until it ends, holds convergence back.
  const care = planCare(view, { converged, membershipBusy: membershipAction !== undefined });
  care.actions.push(...downgrade.actions, ...pinned.actions);
  step.waits.push(...downgrade.waits, ...pinned.waits, ...care.waits);
  const phases: Record<string, ReturnType<typeof phaseOf>> = {};
  for (const m of observed.machines) phases[nameOf(m)] = step.failed.has(nameOf(m)) ? 'Failed' : phaseOf(view, m);
  const decision: Decision = {
    machineActions,
    waits: step.waits,
    conditions: [...conditionsFor(view, step.waits, { failed: step.failed, leaving: step.leaving, converged }), ...care.conditions, ...pinned.conditions],
    requeueAfterMs: Math.min(requeueAfter(step, actionCount, converged), care.nextDueInMs ?? Infinity),
    // A rolling care job is carried on pass by pass: the loop goes on until it ends.
    converged: converged && !careJobBusy(care),
    phases,
  };
  if (membershipAction) decision.membershipAction = membershipAction;
  if (care.actions.length > 0) decision.careActions = care.actions;
  if (step.blocked) decision.blocked = step.blocked;
  return decision;
}

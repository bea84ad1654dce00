import { selectVictims, type VictimCandidate } from '../domain/selection.ts';
import { removal } from './removal.ts';
import { activeMachines, byOrdinal, isGone, isReadyVoter, nameOf, type Step } from './step.ts';
import type { MachineAction, MembershipAction, ObservedMachine, ObservedMember, RequestMachineDeletion } from './types.ts';

function victimCandidate(step: Step, machine: ObservedMachine): VictimCandidate {
  const member = step.view.memberOf(machine);
  const candidate: VictimCandidate = {
    name: nameOf(machine),
    ordinal: machine.record.ordinal,
    createdAt: machine.record.createdAt,
    // A learner has no vote: removing it never touches quorum or leadership, so it goes before any
    // voter. Ranked as a voter, "oldest first" could pick the last voter over a learner, which can
    // never leave (LastVoter) and, under the serial strategy, deadlocks once that learner is gone.
    notMember: member === undefined || member.isLearner,
    unhealthy: member !== undefined && !member.isLearner && !step.view.isHealthyVoter(member),
    outdated: step.view.isOutdated(machine),
  };
  if (machine.record.failureDomain !== undefined) candidate.failureDomain = machine.record.failureDomain;
  return candidate;
}

/** Scale down and rollout: which machines to let go now. Their member removals then go one at a time. */
export function requestDeletions(step: Step): RequestMachineDeletion[] {
  const { view } = step;
  if (!view.membersKnown) return [];
  const { replicas, maxSurge } = view.spec;
  const active = activeMachines(step);
  const outdated = active.filter(view.isOutdated);
  let pool = active;
  let excess = active.length - replicas;
  let reason = 'ScaleDown';
  if (outdated.length > 0) {
    pool = outdated;
    reason = 'RollingOut';
    if (maxSurge > 0) {
      const readyUpToDate = active.filter((m) => !view.isOutdated(m) && isReadyVoter(view, m)).length;
      excess = Math.max(outdated.length - Math.max(0, replicas - readyUpToDate), active.length - (replicas + maxSurge));
    } else {
      // Remove first, then add: only from a fully healthy cluster at its size, one machine at a time.
      const allReady = active.length >= replicas && active.every((m) => isReadyVoter(view, m)) && view.learners.length === 0;
      excess = allReady ? active.length - replicas + 1 : active.length - replicas;
    }
  }
  if (excess <= 0) return [];
  const victims = selectVictims(pool.map((m) => victimCandidate(step, m)), excess);
  return victims.map((v) => {
    step.leaving.add(v.name);
    return { kind: 'RequestMachineDeletion', machine: v.name, reason };
  });
}

/** Tear down machines that are failed or leaving and no longer have a member (invariant 5). */
export function teardowns(step: Step): MachineAction[] {
  const { view } = step;
  const actions: MachineAction[] = [];
  for (const machine of view.observed.machines) {
    if (!isGone(step, machine)) continue;
    const neverJoined = !machine.infra || machine.infra.state !== 'Provisioned' || (machine.record.memberId === undefined && !machine.infra.memberRunning);
    if (!view.membersKnown && !neverJoined) continue;
    if (view.memberOf(machine)) continue;
    // Deleting: each DeleteMachine moves the teardown on until the machine is gone (observing never does).
    if (machine.infra?.state === 'Deleting') step.waits.push({ code: 'MachineDeleting', message: `machine ${nameOf(machine)} is being deleted`, machine: nameOf(machine) });
    actions.push({ kind: 'DeleteMachine', machine: nameOf(machine), reason: step.failed.has(nameOf(machine)) ? 'Remediation' : 'NoLongerNeeded' });
  }
  return actions;
}


/** Remediation first, then rollout and scale-down victims: one member leaves per decision. */
export function departures(step: Step): MembershipAction | undefined {
  const { view } = step;
  const leavingVoters = view.voters
    .map((member) => ({ member, machine: view.machineOf(member) }))
    .filter((x): x is { member: ObservedMember; machine: ObservedMachine } => x.machine !== undefined && isGone(step, x.machine))
    .sort((a, b) => {
      const failedFirst = Number(step.leaving.has(nameOf(a.machine))) - Number(step.leaving.has(nameOf(b.machine)));
      const unhealthyFirst = Number(view.isHealthyVoter(a.member)) - Number(view.isHealthyVoter(b.member));
      return failedFirst || unhealthyFirst || byOrdinal(a.machine, b.machine);
    });
  for (const { member, machine } of leavingVoters) {
    const reason = step.failed.has(nameOf(machine)) ? 'Remediation' : view.isOutdated(machine) ? 'RollingOut' : 'ScaleDown';
    const action = removal(step, member, reason, machine);
    if (action) return action;
  }
  return undefined;
}

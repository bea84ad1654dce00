import { removal } from './removal.ts';
import { activeMachines, isGone, nameOf, type Step } from './step.ts';
import type { MembershipAction, ObservedMachine, RestartMember } from './types.ts';
import { type ClusterView } from './view.ts';

/** Least time between two restarts of a member that keeps exiting (a member starts in 1-2 s). */
export const MEMBER_RESTART_BACKOFF_MS = 2000;

export function repair(step: Step): MembershipAction | undefined {
  const { view } = step;
  for (const learner of view.learners) {
    const machine = view.machineOf(learner);
    if (!machine || isGone(step, machine)) return removal(step, learner, machine ? 'RemoveFailedLearner' : 'RemoveOrphanLearner', machine);
  }
  for (const learner of view.learners) {
    const machine = view.machineOf(learner);
    if (machine?.infra?.state === 'Provisioned' && !machine.infra.memberRunning && machine.infra.memberStartedAt === undefined) {
      return { kind: 'StartMember', machine: nameOf(machine), memberId: learner.id, initialClusterState: 'existing', reason: 'StartAddedLearner' };
    }
  }
  for (const voter of view.voters) {
    if (!view.machineOf(voter)) {
      const action = removal(step, voter, 'RemoveOrphanMember', undefined);
      if (action) return action;
    }
  }
  return undefined;
}


/**
 * Members whose process stopped on a machine that is still provisioned and not leaving: the init
 * machine and machines that have been voters (with a readable list, only those etcd still lists as
 * voters). Their data dirs hold them, so a start brings each back as itself.
 */
export function stoppedMembers(step: Step): ObservedMachine[] {
  const { view } = step;
  return activeMachines(step).filter((m) => {
    if (m.infra?.state !== 'Provisioned' || m.infra.memberRunning) return false;
    if (nameOf(m) !== view.observed.initMachine && m.record.phaseTimes.Voter === undefined) return false;
    if (!view.membersKnown) return true;
    const member = view.memberOf(m);
    return member !== undefined && !member.isLearner;
  });
}

/** An init member that has never been a voter may not have bootstrapped yet: it restarts with `new`. */
export const mayBootstrap = (view: ClusterView, m: ObservedMachine): boolean => nameOf(m) === view.observed.initMachine && m.record.phaseTimes.Voter === undefined;

/** Not again within MEMBER_RESTART_BACKOFF_MS of its last start: a member that keeps exiting is not respawned in a tight loop. */
export function restartDue(step: Step, m: ObservedMachine): boolean {
  const startedAt = m.infra?.memberStartedAt;
  if (startedAt === undefined || step.view.now - startedAt >= MEMBER_RESTART_BACKOFF_MS) return true;
  step.waits.push({ code: 'MemberRestarting', message: `member of ${nameOf(m)} exited ${String(step.view.now - startedAt)} ms after its last start; starting it again once ${String(MEMBER_RESTART_BACKOFF_MS)} ms have passed`, machine: nameOf(m) });
  return false;
}

/**
 * Without quorum (or with no member answering at all) no member can be added or removed, so the only
 * repair is to start the stopped members again from their data dirs: after a host reboot, or when a
 * majority crashed. A start on a data dir changes no membership and never creates a cluster (etcd
 * ignores the bootstrap flags then), so all of them start at once and come back together. With
 * quorum, a stopped member is left to remediation instead.
 */
export function restartsWithoutQuorum(step: Step): RestartMember[] {
  const { view } = step;
  if (view.membersKnown && view.hasQuorum) return [];
  return stoppedMembers(step)
    .filter((m) => !mayBootstrap(view, m) && restartDue(step, m))
    .map((m) => ({ kind: 'RestartMember', machine: nameOf(m), reason: view.membersKnown ? 'QuorumLost' : 'MemberListUnavailable' }));
}

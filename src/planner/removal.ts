import { keepsQuorum, quorum } from '../domain/quorum.ts';
import { drainWait } from './components.ts';
import { guardRemoval } from './guard.ts';
import { byOrdinal, isGone, nameOf, type Step } from './step.ts';
import type { MembershipAction, ObservedMachine, ObservedMember } from './types.ts';
import { leaderClaims } from './health.ts';
import { learnerNames, unstartedLearners } from './preflight.ts';
import type { ClusterView } from './view.ts';

/** A member by its machine's name, else by its ID (an orphan member). */
function memberName(view: ClusterView, id: string): string {
  const member = view.members.find((m) => m.id === id);
  const machine = member ? view.machineOf(member) : undefined;
  return machine ? nameOf(machine) : `member ${id}`;
}

/**
 * The healthiest up-to-date voter that is staying, oldest first (ordinals are reused, so by creation
 * time, then ordinal): where leadership goes before a removal.
 */
function leaderTarget(step: Step, from: ObservedMember): ObservedMember | undefined {
  const { view } = step;
  const staying = view.healthyVoters.flatMap((member) => {
    const machine = view.machineOf(member);
    return member.id !== from.id && machine !== undefined && !isGone(step, machine) ? [{ member, machine }] : [];
  });
  staying.sort(
    (a, b) => Number(view.isOutdated(a.machine)) - Number(view.isOutdated(b.machine)) || a.machine.record.createdAt - b.machine.record.createdAt || byOrdinal(a.machine, b.machine),
  );
  return staying[0]?.member;
}

/**
 * The membership change that lets one member go: a learner at once (it has no vote and never leads);
 * a voter only while it is not the last, only once leadership is known (every answering voter names
 * the same leader) and has been moved off it, and only if the healthy voters left keep quorum. With
 * leadership disputed, the member may be the leader a stale voter does not know of yet: removing it
 * would cost an election, so the removal waits (LeaderUnknown) until the voters agree. Nothing leaves
 * while another learner that may still boot has not named itself (LearnerNotStarted), nor while a
 * Kubernetes machine still serves (Draining).
 */
export function removal(step: Step, member: ObservedMember, reason: string, machine: ObservedMachine | undefined): MembershipAction | undefined {
  const { view } = step;
  const who = machine ? nameOf(machine) : `member ${member.id}`;
  const onMachine = machine ? { machine: nameOf(machine) } : {};
  // As for an add (preflightForAdd): a learner that may still boot would find a membership other than
  // the one it was given and exit. One whose machine is going boots into nothing worth keeping.
  const booting = unstartedLearners(view).filter((l) => {
    const host = view.machineOf(l);
    return l.id !== member.id && host !== undefined && !isGone(step, host);
  });
  if (booting.length > 0) {
    step.waits.push({ code: 'LearnerNotStarted', message: `not removing ${who}: learner ${learnerNames(view, booting)} has not started yet and a removal now would change the membership it boots with`, ...onMachine });
    return undefined;
  }
  const draining = machine === undefined ? undefined : drainWait(step, machine);
  if (draining !== undefined) {
    step.waits.push({ code: 'Draining', message: `not removing ${who} yet: ${draining}`, ...onMachine });
    return undefined;
  }
  if (member.isLearner) {
    return { kind: 'RemoveMember', memberId: member.id, peerURL: member.peerURLs[0] ?? '', reason, ...onMachine };
  }
  if (view.voters.length <= 1) {
    step.waits.push({ code: 'LastVoter', message: `not removing ${who}: it is the last voter`, ...onMachine });
    return undefined;
  }
  if (view.leaderId === undefined) {
    step.waits.push({ code: 'LeaderUnknown', message: `not removing ${who} until the voters agree on a leader (${leaderClaims(view.voters.map(view.readingOf), (id) => memberName(view, id))})`, ...onMachine });
    return undefined;
  }
  if (member.id === view.leaderId) {
    const target = leaderTarget(step, member);
    if (!target) {
      step.waits.push({ code: 'NoLeaderTarget', message: `${who} leads and no healthy voter can take over` });
      return undefined;
    }
    const targetMachine = view.machineOf(target);
    return { kind: 'MoveLeader', fromMemberId: member.id, toMemberId: target.id, machine: targetMachine ? nameOf(targetMachine) : target.id, reason: `Before${reason}` };
  }
  const healthyDelta = view.isHealthyVoter(member) ? -1 : 0;
  if (!keepsQuorum(view.voters.length, view.healthyVoters.length, -1, healthyDelta)) {
    step.waits.push({
      code: 'QuorumWouldBreak',
      message: `removing ${who} would leave ${String(view.healthyVoters.length + healthyDelta)} healthy of ${String(view.voters.length - 1)} voters (quorum ${String(quorum(view.voters.length - 1))})`,
    });
    return undefined;
  }
  const guard = guardRemoval(view, member);
  if (guard.length > 0) {
    step.waits.push(...guard.map((w) => ({ ...w, ...onMachine })));
    return undefined;
  }
  return { kind: 'RemoveMember', memberId: member.id, peerURL: member.peerURLs[0] ?? '', reason, ...onMachine };
}

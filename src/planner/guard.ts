import { keepsQuorum, quorum } from '../domain/quorum.ts';
import { namesNoLeader } from './health.ts';
import type { EtcdMemberStatus } from '../ports/etcd-admin.ts';
import type { ObservedMember, Wait } from './types.ts';
import { CATCH_UP_MARGIN, type ClusterView } from './view.ts';

/**
 * Guarded reconfiguration (`spec.etcd.reconfigurationCheck: fastplane`): the members run with
 * `--strict-reconfig-check=false`, so etcd no longer refuses an add or a removal for its 5 s
 * peer-connection rule, and the planner makes the equivalent checks itself, on the observation of
 * the same pass (and, for removals, the readings of earlier passes). Each function returns the waits
 * that hold the change; none when every member runs etcd's checks, where etcd guards itself.
 */

/** etcd's default election timeout: a follower cut off from the leader for longer stops naming it. */
export const ELECTION_TIMEOUT_MS = 1000;

/**
 * The guard follows what the members run, not only the spec: switched back to `etcd`, members started
 * with etcd's checks off keep them off until they are rolled, and until the last one is, fastplane
 * checks. (Switched to `fastplane`, members still running etcd's checks only add theirs.)
 */
export const isGuarded = (view: ClusterView): boolean => view.spec.reconfigurationCheck === 'fastplane' || view.uncheckedMembers.length > 0;

function statusOf(member: ObservedMember): EtcdMemberStatus | undefined {
  return member.status?.ok === true ? member.status.status : undefined;
}

function nameOf(view: ClusterView, member: ObservedMember): string {
  return view.machineOf(member)?.record.name ?? `member ${member.id}`;
}

/** Answers, names the agreed leader and is in the leader's raft term. */
function inStep(view: ClusterView, member: ObservedMember): boolean {
  const status = statusOf(member);
  return status !== undefined && view.leaderStatus !== undefined && status.leaderId === view.leaderId && status.raftTerm === view.leaderStatus.raftTerm;
}

/** Answering voters that name another term than the leader's: a vote is under way or was just lost. */
function outOfStep(view: ClusterView): Wait[] {
  const leader = view.leaderStatus;
  if (leader === undefined) return [];
  return view.voters.flatMap((voter) => {
    const status = statusOf(voter);
    if (status === undefined || namesNoLeader(view.readingOf(voter)) || status.raftTerm === leader.raftTerm) return [];
    const machine = view.machineOf(voter);
    return [{ code: 'VoterOutOfStep', message: `voter ${nameOf(view, voter)} is in raft term ${String(status.raftTerm)}, the leader in ${String(leader.raftTerm)}`, ...(machine ? { machine: machine.record.name } : {}) }];
  });
}

/**
 * Before AddLearner: every voter answers, names the leader and is in its term (etcd 3.4's rule asks
 * every voter be connected; the learner slot is the preflight's). A learner never counts toward quorum.
 */
export function guardAdd(view: ClusterView): Wait[] {
  // Voters that do not answer or disagree on the leader are the preflight's (VoterUnhealthy,
  // LeaderUnknown); what is left is the term.
  return isGuarded(view) ? outOfStep(view) : [];
}

/**
 * Before PromoteLearner (the learner already answers and is within the catch-up margin): no voter in
 * another term, and the voters in step with the leader, plus the learner, make a quorum of the new size.
 */
export function guardPromotion(view: ClusterView, learner: ObservedMember): Wait[] {
  if (!isGuarded(view)) return [];
  const waits = outOfStep(view);
  const inStepVoters = view.voters.filter((v) => inStep(view, v)).length;
  // The promotion's projection: one voter more, the learner counted healthy once in step with the rest.
  if (!keepsQuorum(view.voters.length, inStepVoters, 1, 1)) {
    waits.push({ code: 'PromotionQuorumUnproven', message: `promoting ${nameOf(view, learner)} needs ${String(quorum(view.voters.length + 1))} healthy voters of ${String(view.voters.length + 1)}; ${String(inStepVoters)} voters and the learner answer in the leader's term` });
  }
  return waits;
}

/** Within the margin of the leader's raft index, naming it, in this reading. */
function keptUp(statuses: Record<string, { leaderId: string; raftIndex: number }>, voterId: string, leaderId: string): boolean {
  const mine = statuses[voterId];
  const leader = statuses[leaderId];
  return mine !== undefined && leader !== undefined && mine.leaderId === leaderId && leader.leaderId === leaderId && leader.raftIndex - mine.raftIndex <= CATCH_UP_MARGIN;
}

/**
 * Before removing a voter (not the leader: removal() moves leadership first): the voters left reach
 * quorum counting only those that kept within the margin of the leader's raft index in every reading
 * since one at least an election timeout old, and in this one. A voter cut off from the leader may
 * still answer fastplane, but within an election timeout it stops naming the leader, or falls behind
 * under writes; one reading alone cannot tell.
 */
export function guardRemoval(view: ClusterView, victim: ObservedMember): Wait[] {
  if (!isGuarded(view) || view.leaderId === undefined) return [];
  const leaderId = view.leaderId;
  const waits = outOfStep(view);
  const earlier = view.observed.earlierReadings ?? [];
  const reference = earlier.filter((r) => view.now - r.at >= ELECTION_TIMEOUT_MS).at(-1);
  if (reference === undefined) {
    waits.push({ code: 'ConnectivityUnproven', message: `removing ${nameOf(view, victim)} waits for status readings spanning an election timeout (${String(ELECTION_TIMEOUT_MS)} ms)` });
    return waits;
  }
  const current: Record<string, { leaderId: string; raftIndex: number }> = {};
  for (const member of view.members) {
    const status = statusOf(member);
    if (status) current[member.id] = status;
  }
  const readings = [...earlier.filter((r) => r.at >= reference.at).map((r) => r.statuses), current];
  const rest = view.voters.filter((v) => v.id !== victim.id);
  const connected = rest.filter((v) => inStep(view, v) && readings.every((statuses) => keptUp(statuses, v.id, leaderId)));
  // The removal's projection, counting as healthy only the voters shown connected.
  if (!keepsQuorum(view.voters.length, connected.length, -1, 0)) {
    const unproven = rest.filter((v) => !connected.includes(v)).map((v) => nameOf(view, v));
    waits.push({
      code: 'VotersNotConnected',
      // No elapsed time in the message: a wait that lasts must read the same on every pass (nothing to rewrite).
      message: `removing ${nameOf(view, victim)} needs ${String(quorum(rest.length))} of the ${String(rest.length)} voters left kept up with the leader for at least an election timeout (${String(ELECTION_TIMEOUT_MS)} ms); not shown by ${unproven.join(', ')}`,
    });
  }
  return waits;
}

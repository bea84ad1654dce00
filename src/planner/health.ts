import { keepsQuorum, quorum } from '../domain/quorum.ts';

/**
 * Health, in one place: which voter is healthy, which leader the voters agree on, whether quorum holds
 * and whether one voter may be taken down now. The planner (its view, the guard), the executor's last
 * re-check before a removal and day-2 care (rolling restarts, recovery) all judge by these, so no two
 * paths can disagree on the same readings.
 */

/** One voter as a health judgement sees it, from a member list and its status answer. */
export interface VoterReading {
  id: string;
  name: string;
  /** The leader its status names ('0': none), when it answered. */
  leaderId?: string;
  /**
   * The raft term of that answer, when the reader takes it into account (the executor's last re-check
   * does; the planner's guard judges terms itself): claims then agree only within one term.
   */
  term?: number;
  /** False when its machine reports the member's process stopped: the answer is stale. */
  running?: boolean;
}

/** Answers and names a leader ('0' is etcd's "none": mid-election, or cut off from its peers). */
export function namesLeader(reading: VoterReading): boolean {
  return reading.leaderId !== undefined && reading.leaderId !== '0';
}

/** Answers but names no leader. */
export function namesNoLeader(reading: VoterReading): boolean {
  return reading.leaderId === '0';
}

/** The healthy-voter predicate: answers, names a leader, and its machine does not report it stopped. */
export function isHealthyVoter(reading: VoterReading): boolean {
  // Naming no leader counts as unhealthy: it may be cut off, and a transfer's leaderless moment only delays work.

  return namesLeader(reading) && reading.running !== false;
}

/**
 * The leader rule: the leader every voter that names one agrees on, in the same raft term, itself one
 * of the voters. A voter on a machine reported stopped still counts (a claim that contradicts the
 * others is reason enough to doubt who leads); a voter naming none contradicts nobody. Undefined when
 * the claims disagree on the leader or the term (a stale follower still names the old leader, or the
 * same leader of an earlier term: an election happened since), name a non-voter, or none names one.
 */
export function agreedLeader(voters: readonly VoterReading[]): string | undefined {
  const claimants = voters.filter(namesLeader);
  const claims = new Set(claimants.map((v) => `${v.leaderId ?? ''}@${String(v.term ?? '')}`));
  const leaderId = claimants[0]?.leaderId;
  return claims.size === 1 && voters.some((v) => v.id === leaderId) ? leaderId : undefined;
}

/**
 * Quorum holds among `voters` while `healthy` of them, less `stopping` healthy ones taken down, make a
 * majority: the projection every membership change is judged by (keepsQuorum), with no voter added
 * or removed.
 */
export function quorumHolds(voters: number, healthy: number, stopping = 0): boolean {
  return keepsQuorum(voters, healthy, 0, -stopping);
}

/** Quorum holds among these voters as they read now. */
export function votersHoldQuorum(voters: readonly VoterReading[]): boolean {
  return quorumHolds(voters.length, voters.filter(isHealthyVoter).length);
}

export type StopCode = 'NotAVoter' | 'LearnerJoining' | 'LeaderUnknown' | 'IsLeader' | 'QuorumWouldBreak';
export type StopVerdict = { ok: true } | { ok: false; code: StopCode; message: string };

/** What each voter says about the leader, for a LeaderUnknown message. */
export function leaderClaims(voters: readonly VoterReading[], nameOf: (id: string) => string = (id) => voters.find((v) => v.id === id)?.name ?? id): string {
  const claims = voters.filter((v) => v.leaderId !== undefined).map((v) => `${nameOf(v.id)} names ${namesLeader(v) ? nameOf(v.leaderId ?? '') : 'none'}`);
  return claims.length > 0 ? claims.join(', ') : 'none answers';
}

/**
 * May voter `id` be stopped now and started again (it stays a member)? Only while no learner joins
 * (one membership change at a time), the voters agree on a leader that is not this voter (leadership
 * moves off it first, so stopping it costs no election), and the healthy voters left while it is down
 * keep quorum. A lone voter may restart although its cluster pauses meanwhile: nothing else could ever
 * restart it.
 */
export function mayStopVoter(voters: readonly VoterReading[], learners: readonly string[], id: string): StopVerdict {
  const voter = voters.find((v) => v.id === id);
  if (!voter) return { ok: false, code: 'NotAVoter', message: `member ${id} is not a voter of the cluster now` };
  const [learner] = learners;
  if (learner !== undefined) return { ok: false, code: 'LearnerJoining', message: `learner ${learner} is joining; run it again once the cluster converged` };
  const leaderId = agreedLeader(voters);
  if (leaderId === undefined) return { ok: false, code: 'LeaderUnknown', message: `voters do not agree on a leader (${leaderClaims(voters)})` };
  if (voters.length === 1) return { ok: true };
  if (leaderId === id) return { ok: false, code: 'IsLeader', message: `${voter.name} leads: leadership moves off it first` };
  const healthy = voters.filter(isHealthyVoter).length;
  const stopping = isHealthyVoter(voter) ? 1 : 0;
  if (!quorumHolds(voters.length, healthy, stopping)) {
    const down = voters.filter((v) => !isHealthyVoter(v)).map((v) => v.name);
    return {
      ok: false,
      code: 'QuorumWouldBreak',
      message: `stopping ${voter.name} would leave ${String(healthy - stopping)} healthy of ${String(voters.length)} voters (quorum ${String(quorum(voters.length))})${down.length > 0 ? `; not answering: ${down.join(', ')}` : ''}`,
    };
  }
  return { ok: true };
}

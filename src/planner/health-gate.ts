import { keepsQuorum, quorum } from '../domain/quorum.ts';

/**
 * The health and quorum gate: whether the cluster holds quorum, and whether one voter may be taken
 * down now. The planner judges its membership changes with it, and day-2 care its rolling restarts
 * (certificate renewal, CA rotation, defragmentation), so both stop a voter under the same rule.
 */

/** One voter as the gate sees it. */
export interface VoterHealthReading {
  id: string;
  name: string;
  /** Answers its own status and names a leader. */
  healthy: boolean;
  /** The leader it names, when it answers. */
  leaderId?: string;
}

/**
 * Quorum holds among `voters` while `healthy` of them, less `stopping` healthy ones taken down, make a
 * majority: the projection every membership change is judged by (keepsQuorum), with no voter added
 * or removed.
 */
export function quorumHolds(voters: number, healthy: number, stopping = 0): boolean {
  return keepsQuorum(voters, healthy, 0, -stopping);
}

/**
 * The leader every healthy voter names, itself one of the voters; undefined when they disagree (a stale
 * voter still names the old leader) or none names one.
 */
export function agreedLeader(voters: readonly VoterHealthReading[]): string | undefined {
  const claims = new Set(voters.filter((v) => v.healthy).map((v) => v.leaderId));
  const [leaderId] = claims;
  return claims.size === 1 && voters.some((v) => v.id === leaderId) ? leaderId : undefined;
}

export type StopVerdict = { ok: true } | { ok: false; code: 'NotAVoter' | 'LearnerJoining' | 'LeaderUnknown' | 'IsLeader' | 'QuorumWouldBreak'; message: string };

/**
 * May voter `id` be stopped now and started again (it stays a member)? Only while no learner joins
 * (one membership change at a time), the voters agree on a leader that is not this voter (leadership
 * moves off it first, so stopping it costs no election), and the healthy voters left while it is down
 * keep quorum. A lone voter may restart although its cluster pauses meanwhile: nothing else could ever
 * restart it.
 */
export function mayStopVoter(voters: readonly VoterHealthReading[], learners: readonly string[], id: string): StopVerdict {
  const voter = voters.find((v) => v.id === id);
  if (!voter) return { ok: false, code: 'NotAVoter', message: `member ${id} is not a voter of the cluster now` };
  const [learner] = learners;
  if (learner !== undefined) return { ok: false, code: 'LearnerJoining', message: `learner ${learner} is joining; run it again once the cluster converged` };
  const leaderId = agreedLeader(voters);
  if (leaderId === undefined) {
    const claims = voters.filter((v) => v.healthy).map((v) => `${v.name} names ${v.leaderId ?? 'none'}`);
    return { ok: false, code: 'LeaderUnknown', message: `voters do not agree on a leader (${claims.length > 0 ? claims.join(', ') : 'none answers'})` };
  }
  if (voters.length === 1) return { ok: true };
  if (leaderId === id) return { ok: false, code: 'IsLeader', message: `${voter.name} leads: leadership moves off it first` };
  const healthy = voters.filter((v) => v.healthy).length;
  if (!quorumHolds(voters.length, healthy, voter.healthy ? 1 : 0)) {
    const down = voters.filter((v) => !v.healthy).map((v) => v.name);
    return {
      ok: false,
      code: 'QuorumWouldBreak',
      message: `stopping ${voter.name} would leave ${String(healthy - (voter.healthy ? 1 : 0))} healthy of ${String(voters.length)} voters (quorum ${String(quorum(voters.length))})${down.length > 0 ? `; not answering: ${down.join(', ')}` : ''}`,
    };
  }
  return { ok: true };
}

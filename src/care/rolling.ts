import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin, EtcdMember, EtcdMemberStatus } from '../ports/etcd-admin.ts';
import { BlockedError } from './blocked-error.ts';

/**
 * Day-2 work done to members one at a time (certificate renewal, defragmentation): the cluster must
 * be healthy before it starts and again before each next member, followers go first, and the leader
 * goes last, after leadership has moved away, so no step costs an election on top of the member's own
 * pause and quorum is never lost.
 */

export interface VoterHealth {
  member: EtcdMember;
  endpoint: string;
  status: EtcdMemberStatus;
}

export interface ClusterHealth {
  leaderId: string;
  /** Followers first, the leader last. */
  voters: VoterHealth[];
}

/** Every voter answers and names the same leader, and no learner is joining; else BlockedError naming why. */
export async function healthyVoters(admin: EtcdAdmin, endpoints: readonly string[]): Promise<ClusterHealth> {
  let members: EtcdMember[];
  try {
    members = await admin.memberList(endpoints);
  } catch (error) {
    throw new BlockedError(`cannot read the member list: ${error instanceof Error ? error.message : String(error)}`);
  }
  const learner = members.find((m) => m.isLearner);
  if (learner) throw new BlockedError(`learner ${learner.name || learner.id} is joining; run it again once the cluster converged`);
  const voters: VoterHealth[] = [];
  for (const member of members) {
    const endpoint = member.clientURLs[0];
    if (endpoint === undefined) throw new BlockedError(`voter ${member.name || member.id} has not started`);
    try {
      voters.push({ member, endpoint, status: await admin.status(endpoint) });
    } catch (error) {
      throw new BlockedError(`voter ${member.name || member.id} does not answer (${error instanceof Error ? error.message : String(error)})`);
    }
  }
  const leaders = new Set(voters.map((v) => v.status.leaderId));
  const [leaderId] = leaders;
  if (leaders.size !== 1 || leaderId === undefined || leaderId === '0') throw new BlockedError(`voters do not agree on a leader (${[...leaders].join(', ')})`);
  voters.sort((a, b) => Number(a.member.id === leaderId) - Number(b.member.id === leaderId));
  return { leaderId, voters };
}

/** Waits until the cluster is healthy again (each voter answers with the same leader); BlockedError after timeoutMs. */
export async function waitHealthy(admin: EtcdAdmin, endpoints: readonly string[], clock: Clock, timeoutMs: number): Promise<ClusterHealth> {
  const deadline = clock.now() + timeoutMs;
  for (;;) {
    try {
      return await healthyVoters(admin, endpoints);
    } catch (error) {
      if (!(error instanceof BlockedError) || clock.now() >= deadline) throw error;
    }
    await clock.sleep(200);
  }
}

/** Moves leadership from the leader to the first follower, and waits until every voter sees the new one. */
export async function moveLeadershipAway(admin: EtcdAdmin, health: ClusterHealth, clock: Clock, timeoutMs: number): Promise<ClusterHealth> {
  const leader = health.voters.find((v) => v.member.id === health.leaderId);
  const target = health.voters.find((v) => v.member.id !== health.leaderId);
  if (!leader || !target) return health;
  await admin.moveLeader(leader.endpoint, target.member.id);
  const endpoints = health.voters.map((v) => v.endpoint);
  const deadline = clock.now() + timeoutMs;
  for (;;) {
    const now = await waitHealthy(admin, endpoints, clock, timeoutMs);
    if (now.leaderId !== leader.member.id) return now;
    if (clock.now() >= deadline) throw new BlockedError(`leadership did not move off ${leader.member.name}`);
    await clock.sleep(200);
  }
}

/**
 * Runs `step` on each voter (or those whose IDs are in `only`), followers first and the leader last
 * (after moving leadership away), with the cluster healthy again before each next step. `beforeEach`
 * guards every step (the lease).
 */
export async function oneVoterAtATime(
  admin: EtcdAdmin,
  endpoints: readonly string[],
  options: { clock: Clock; healthTimeoutMs: number; beforeEach: () => Promise<void>; only?: ReadonlySet<string> },
  step: (voter: VoterHealth) => Promise<void>,
): Promise<void> {
  const { clock, healthTimeoutMs, only } = options;
  const first = await healthyVoters(admin, endpoints);
  for (const id of first.voters.map((v) => v.member.id).filter((memberId) => only?.has(memberId) ?? true)) {
    let health = await waitHealthy(admin, endpoints, clock, healthTimeoutMs);
    if (id === health.leaderId && health.voters.length > 1) health = await moveLeadershipAway(admin, health, clock, healthTimeoutMs);
    const voter = health.voters.find((v) => v.member.id === id);
    if (!voter) throw new BlockedError(`member ${id} left the cluster meanwhile`);
    await options.beforeEach();
    await step(voter);
  }
  await waitHealthy(admin, endpoints, clock, healthTimeoutMs);
}

import type { EtcdAdmin, EtcdMember } from '../ports/etcd-admin.ts';
import { done, failed, requeueAfter, type StepResult } from './steps.ts';

/**
 * After a member restarts in place it rebuilds its membership from its own data (docs/etcd-behaviour.md,
 * "A restart and the learner limit"), so it is asked whether it still agrees with the cluster: a
 * member that lists other members than the leader does would vote and count quorum on another
 * cluster. Care stops its job on any difference instead of restarting the next member.
 */

/** Who belongs and as what: IDs, roles and peer URLs (a learner's name and client URLs come only once it starts). */
function membershipOf(members: readonly EtcdMember[]): string[] {
  return members.map((m) => `${m.id} ${m.isLearner ? 'learner' : 'voter'} ${[...m.peerURLs].sort().join(',')}`).sort();
}

/** How `own` differs from `reference`, or undefined when both list the same members in the same roles. */
export function membershipDifference(own: readonly EtcdMember[], reference: readonly EtcdMember[]): string | undefined {
  const mine = membershipOf(own);
  const theirs = membershipOf(reference);
  const differences = [...mine.filter((m) => !theirs.includes(m)).map((m) => `only it lists ${m}`), ...theirs.filter((m) => !mine.includes(m)).map((m) => `only the leader lists ${m}`)];
  return differences.length === 0 ? undefined : differences.join('; ');
}

export interface AnsweringMember {
  name: string;
  endpoint: string;
}

const POLL_MS = 200;

/**
 * Done when `member`, asked alone (serializable: what it has applied itself), lists the members
 * `leader` lists. Its applied index is read before its list and the leader's after, so a difference
 * while the member has applied at least as far as the leader is a divergence (Error
 * MembershipDiverged); one while it still catches up is asked again (RequeueAfter MembershipCatchingUp).
 */
export async function membershipAgrees(admin: EtcdAdmin, member: AnsweringMember, leader: AnsweringMember): Promise<StepResult> {
  const serializable = { linearizable: false };
  let own: EtcdMember[];
  let reference: EtcdMember[];
  let applied: number;
  let leaderApplied: number;
  try {
    applied = (await admin.status(member.endpoint)).raftAppliedIndex;
    own = await admin.memberList([member.endpoint], serializable);
    reference = await admin.memberList([leader.endpoint], serializable);
    leaderApplied = (await admin.status(leader.endpoint)).raftAppliedIndex;
  } catch (error) {
    return requeueAfter(POLL_MS, 'MemberListUnavailable', `cannot compare the member lists of ${member.name} and ${leader.name}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const difference = membershipDifference(own, reference);
  if (difference === undefined) return done(`${member.name} lists the same members as ${leader.name}`);
  const message = `${member.name} does not list the members ${leader.name} lists (${difference})`;
  if (applied < leaderApplied) return requeueAfter(POLL_MS, 'MembershipCatchingUp', `${message}, at applied index ${String(applied)} of ${String(leaderApplied)}`);
  return failed('MembershipDiverged', `${message} at applied index ${String(applied)}: the membership diverged after its restart; stopped before any other member is restarted`);
}

import { quorum } from '../domain/quorum.ts';
import type { AddLearner, MembershipAction, MoveLeader, Observed, ObservedMember, PromoteLearner, RemoveMember, StartMember } from '../planner/types.ts';
import { peerURLOf } from '../planner/view.ts';
import { EtcdAdminError, type EtcdMemberStatus } from '../ports/etcd-admin.ts';
import { initialClusterFor, startMachineMember } from '../cluster/member-launch.ts';
import type { ControlPlaneRecord } from '../domain/machine.ts';
import type { ExecutorDeps } from './executor-deps.ts';
import type { FailpointName } from './failpoints.ts';
import { agreedLeader, isHealthyVoter, leaderClaims, quorumHolds, type VoterReading } from '../planner/health.ts';

// Membership actions: at most one per pass per cluster, never retried blindly.

/** Voter client URLs, leader first: membership calls go to voters only (learners refuse them). */
function voterEndpoints(observed: Observed, exceptMemberId?: string): string[] {
  if (!observed.members.ok) return [];
  const voters = observed.members.list.filter((m) => !m.isLearner && m.id !== exceptMemberId && m.clientURLs.length > 0);
  const leaderIds = new Set(voters.map((m) => (m.status?.ok ? m.status.status.leaderId : '')));
  const isLeader = (m: ObservedMember): boolean => leaderIds.has(m.id);
  return [...voters].sort((a, b) => Number(isLeader(b)) - Number(isLeader(a))).flatMap((m) => m.clientURLs.slice(0, 1));
}

/** How many voters the observed member list holds, less the one leaving. */
function voterCount(observed: Observed, exceptMemberId?: string): number {
  return observed.members.ok ? observed.members.list.filter((m) => !m.isLearner && m.id !== exceptMemberId).length : 0;
}

function peerURLFor(observed: Observed, name: string): string {
  const machine = observed.machines.find((m) => m.record.name === name);
  const peerURL = machine ? peerURLOf(machine) : undefined;
  if (peerURL === undefined) throw new Error(`machine ${name} has no peer URL`);
  return peerURL;
}

/** How the member of a machine entering the membership starts, once its membership is recorded (init) or made (add). */
interface MemberStart {
  state: 'new' | 'existing';
  initialCluster: string;
  /** The failpoint right after the start. */
  after?: FailpointName;
}

async function initCluster(deps: ExecutorDeps, observed: Observed, name: string): Promise<MemberStart> {
  const peerURL = peerURLFor(observed, name);
  const now = deps.clock.now();
  // Recorded before the member starts: even a crash right after can never lead to a second init
  // (and the store refuses to name another init machine).
  await deps.writer.commit({ kind: 'PatchControlPlane', patch: { initMachine: name } }, { kind: 'PatchMachine', name, set: { role: 'init', initRecordedAt: now } });
  deps.failpoint('after-init-record');
  return { state: 'new', initialCluster: `${name}=${peerURL}`, after: 'after-init-start' };
}

async function addLearner(deps: ExecutorDeps, observed: Observed, action: AddLearner): Promise<MemberStart> {
  const peerURL = peerURLFor(observed, action.machine);
  await deps.writer.verify();
  const { member, members } = await deps.etcd.addLearner(voterEndpoints(observed), peerURL);
  deps.failpoint('after-add-learner-call');
  await deps.writer.commit({ kind: 'PatchMachine', name: action.machine, set: { memberId: member.id, role: 'join' } });
  deps.failpoint('after-add-learner');
  deps.failpoint('before-start-member');
  return { state: 'existing', initialCluster: initialClusterFor(observed, members), after: 'after-start-member' };
}

async function startMember(deps: ExecutorDeps, observed: Observed, action: StartMember): Promise<MemberStart> {
  const peerURL = peerURLFor(observed, action.machine);
  const initialCluster =
    action.initialClusterState === 'new' ? `${action.machine}=${peerURL}` : initialClusterFor(observed, await deps.etcd.memberList(voterEndpoints(observed)));
  deps.failpoint('before-start-member');
  return { state: action.initialClusterState, initialCluster };
}

/** The start every way into the membership ends with: under the lease, as the records say. */
async function startEntering(deps: ExecutorDeps, cp: ControlPlaneRecord, machine: string, start: MemberStart): Promise<void> {
  await deps.writer.verify();
  await startMachineMember(deps, cp, machine, start.state, start.initialCluster);
  if (start.after !== undefined) deps.failpoint(start.after);
}

/** How long the learner gets to answer right before its promotion: it answered a pass ago, so it is quick. */
const LEARNER_CHECK_MS = 1000;

/**
 * Asks the learner itself, right before its promotion, whether it still answers: the plan was made on
 * a reading a pass old, and a learner that stopped since would join the voters as one that is down.
 */
async function confirmLearnerAnswers(deps: ExecutorDeps, observed: Observed, action: PromoteLearner): Promise<void> {
  const member = observed.members.ok ? observed.members.list.find((m) => m.id === action.memberId) : undefined;
  const endpoint = member?.clientURLs[0] ?? observed.machines.find((m) => m.record.name === action.machine)?.record.clientURL;
  const held = (why: string): EtcdAdminError => new EtcdAdminError('Unreachable', `promotion held: learner ${action.machine} ${why} right now`);
  if (endpoint === undefined) throw held('has no client URL');
  let answered: boolean;
  try {
    answered = await Promise.race([deps.etcd.status(endpoint).then(() => true), deps.clock.sleep(LEARNER_CHECK_MS).then(() => false)]);
  } catch (error) {
    throw held(`does not answer (${error instanceof Error ? error.message : String(error)})`);
  }
  if (!answered) throw held(`did not answer within ${String(LEARNER_CHECK_MS)}ms`);
}

async function promoteLearner(deps: ExecutorDeps, observed: Observed, action: PromoteLearner): Promise<void> {
  const endpoints = voterEndpoints(observed);
  // The re-checks (at once) and the promotion all end before the renew deadline, or none starts.
  await deps.writer.verifySteps(2, 'promotion');
  // The promotion's projection: one voter more, the learner counted healthy (it answers and caught up).
  await Promise.all([confirmLearnerAnswers(deps, observed, action), confirmFreshQuorum(deps, observed, endpoints, voterCount(observed) + 1, 1, 'promotion')]);
  await deps.writer.verifySteps(1, 'promotion');
  try {
    await deps.etcd.promoteLearner(endpoints, action.memberId);
  } catch (error) {
    // "can only promote a learner member": done already, if the member list agrees.
    if (!(error instanceof EtcdAdminError && error.kind === 'NotALearner')) throw error;
    const list = await deps.etcd.memberList(endpoints);
    if (list.find((m) => m.id === action.memberId)?.isLearner !== false) throw error;
  }
  deps.failpoint('after-promote');
}

async function moveLeader(deps: ExecutorDeps, observed: Observed, action: MoveLeader): Promise<void> {
  const leader = observed.members.ok ? observed.members.list.find((m) => m.id === action.fromMemberId) : undefined;
  const endpoint = leader?.clientURLs[0];
  if (endpoint === undefined) throw new Error(`leader ${action.fromMemberId} has no client URL`);
  await deps.writer.verify();
  await deps.etcd.moveLeader(endpoint, action.toMemberId);
  deps.failpoint('after-move-leader');
}

/** A voter's answer as the health rules read it: its leader claim with the term it was made in. */
function readingOf(observed: Observed, status: EtcdMemberStatus): VoterReading {
  const name = (observed.members.ok ? observed.members.list.find((m) => m.id === status.memberId)?.name : undefined) || status.memberId;
  return { id: status.memberId, name, leaderId: status.leaderId, term: status.raftTerm };
}

/**
 * Asks voters right before a removal or a promotion whether they still agree on one leader in one raft
 * term, and whether those that do make a quorum of the voter set the change leaves: the plan was made
 * on readings a pass old, and a voter lost since (or a vote held since) must not be counted (with
 * reconfigurationCheck fastplane etcd no longer refuses such a change itself). `healthyAfter` is what
 * the change adds to the healthy voters that answer. Refused like etcd's own check, so the planner
 * waits and looks again.
 */
async function confirmFreshQuorum(deps: ExecutorDeps, observed: Observed, endpoints: readonly string[], votersAfter: number, healthyAfter: number, what: string): Promise<void> {
  const answers = await Promise.allSettled(endpoints.map((endpoint) => deps.etcd.status(endpoint)));
  const readings = answers.flatMap((a) => (a.status === 'fulfilled' ? [readingOf(observed, a.value)] : []));
  // The planner's gate again, on answers taken right now: the last-moment re-check of the same rules.
  if (agreedLeader(readings) === undefined) {
    throw new EtcdAdminError('UnhealthyCluster', `${what} held: the voters do not agree on a leader and term right now (${leaderClaims(readings)})`);
  }
  const healthy = readings.filter(isHealthyVoter).length;
  if (!quorumHolds(votersAfter, healthy + healthyAfter)) {
    throw new EtcdAdminError('UnhealthyCluster', `${what} held: ${String(healthy)} of ${String(endpoints.length)} voters asked answer with the leader right now, and ${String(votersAfter)} voters need ${String(quorum(votersAfter))}`);
  }
}

async function removeMember(deps: ExecutorDeps, observed: Observed, action: RemoveMember): Promise<void> {
  // Never through the member being removed: it may answer "server stopped" after succeeding.
  const endpoints = voterEndpoints(observed, action.memberId);
  // The re-check and the removal both end before the renew deadline, or neither starts.
  await deps.writer.verifySteps(2, 'removal');
  await confirmFreshQuorum(deps, observed, endpoints, voterCount(observed, action.memberId), 0, 'removal');
  await deps.writer.verifySteps(1, 'removal');
  try {
    await deps.etcd.removeMember(endpoints, action.memberId);
  } catch (error) {
    const ambiguous = error instanceof EtcdAdminError && (error.kind === 'MemberNotFound' || error.kind === 'ServerStopped' || error.kind === 'Timeout');
    if (!ambiguous) throw error;
    const list = await deps.etcd.memberList(endpoints);
    if (list.some((m) => m.id === action.memberId)) throw error;
  }
  deps.failpoint('after-remove-member');
}

/** `cp`: the control plane's record as this pass read it. */
export async function runMembershipAction(deps: ExecutorDeps, cp: ControlPlaneRecord, observed: Observed, action: MembershipAction): Promise<void> {
  switch (action.kind) {
    case 'InitCluster':
      return startEntering(deps, cp, action.machine, await initCluster(deps, observed, action.machine));
    case 'AddLearner':
      return startEntering(deps, cp, action.machine, await addLearner(deps, observed, action));
    case 'StartMember':
      return startEntering(deps, cp, action.machine, await startMember(deps, observed, action));
    case 'PromoteLearner':
      return promoteLearner(deps, observed, action);
    case 'MoveLeader':
      return moveLeader(deps, observed, action);
    case 'RemoveMember':
      return removeMember(deps, observed, action);
  }
}

import { quorum } from '../domain/quorum.ts';
import type { AddLearner, MembershipAction, MoveLeader, Observed, PromoteLearner, RemoveMember, StartMember } from '../planner/types.ts';
import { peerURLOf } from '../planner/view.ts';
import { EtcdAdminError } from '../ports/etcd-admin.ts';
import { initialClusterFor, launchFor, startMemberAs } from '../cluster/member-launch.ts';
import { controlPlane, type ExecutorDeps, machineRecord, voterEndpoints } from './executor-deps.ts';
import { quorumHolds } from '../planner/health-gate.ts';

// Membership actions: at most one per pass per cluster, never retried blindly.

function peerURLFor(observed: Observed, name: string): string {
  const machine = observed.machines.find((m) => m.record.name === name);
  const peerURL = machine ? peerURLOf(machine) : undefined;
  if (peerURL === undefined) throw new Error(`machine ${name} has no peer URL`);
  return peerURL;
}

async function initCluster(deps: ExecutorDeps, observed: Observed, name: string): Promise<void> {
  const peerURL = peerURLFor(observed, name);
  const now = deps.clock.now();
  // Recorded before the member starts: even a crash right after can never lead to a second init
  // (and the store refuses to name another init machine).
  await deps.writer.commit({ kind: 'PatchControlPlane', patch: { initMachine: name } }, { kind: 'PatchMachine', name, set: { role: 'init', initRecordedAt: now } });
  deps.failpoint('after-init-record');
  await deps.writer.verify();
  const record = await machineRecord(deps, name);
  await startMemberAs(deps, record, launchFor(await controlPlane(deps), record, `${name}=${peerURL}`, 'new'));
  deps.failpoint('after-init-start');
}

async function addLearner(deps: ExecutorDeps, observed: Observed, action: AddLearner): Promise<void> {
  const peerURL = peerURLFor(observed, action.machine);
  await deps.writer.verify();
  const { member, members } = await deps.etcd.addLearner(voterEndpoints(observed), peerURL);
  deps.failpoint('after-add-learner-call');
  await deps.writer.commit({ kind: 'PatchMachine', name: action.machine, set: { memberId: member.id, role: 'join' } });
  deps.failpoint('after-add-learner');
  deps.failpoint('before-start-member');
  await deps.writer.verify();
  const record = await machineRecord(deps, action.machine);
  await startMemberAs(deps, record, launchFor(await controlPlane(deps), record, initialClusterFor(observed, members), 'existing'));
  deps.failpoint('after-start-member');
}

async function startMember(deps: ExecutorDeps, observed: Observed, action: StartMember): Promise<void> {
  const record = await machineRecord(deps, action.machine);
  const peerURL = peerURLFor(observed, action.machine);
  const initialCluster =
    action.initialClusterState === 'new' ? `${action.machine}=${peerURL}` : initialClusterFor(observed, await deps.etcd.memberList(voterEndpoints(observed)));
  deps.failpoint('before-start-member');
  await deps.writer.verify();
  await startMemberAs(deps, record, launchFor(await controlPlane(deps), record, initialCluster, action.initialClusterState));
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
  // The learner's check and the promotion both end before the renew deadline, or neither starts.
  await deps.writer.verifySteps(2, 'promotion');
  await confirmLearnerAnswers(deps, observed, action);
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

/**
 * Asks the voters that would remain, right before a removal, whether they still answer with a leader:
 * the plan was made on readings a pass old, and a voter lost since then must not be counted (with
 * reconfigurationCheck fastplane etcd no longer refuses such a removal itself). Refused like etcd's
 * own check, so the planner waits and looks again.
 */
async function confirmRemainingQuorum(deps: ExecutorDeps, observed: Observed, victim: string, endpoints: string[]): Promise<void> {
  const remaining = observed.members.ok ? observed.members.list.filter((m) => !m.isLearner && m.id !== victim).length : endpoints.length;
  const answers = await Promise.allSettled(endpoints.map((endpoint) => deps.etcd.status(endpoint)));
  const healthy = answers.filter((a) => a.status === 'fulfilled' && a.value.leaderId !== '0' && a.value.leaderId !== '').length;
  // The planner's gate again, on answers taken right now: the last-moment re-check of the same rule.
  if (!quorumHolds(remaining, healthy)) {
    throw new EtcdAdminError('UnhealthyCluster', `removal held: ${String(healthy)} of the ${String(remaining)} remaining voters answer with a leader right now, quorum is ${String(quorum(remaining))}`);
  }
}

async function removeMember(deps: ExecutorDeps, observed: Observed, action: RemoveMember): Promise<void> {
  // Never through the member being removed: it may answer "server stopped" after succeeding.
  const endpoints = voterEndpoints(observed, action.memberId);
  // The re-check and the removal both end before the renew deadline, or neither starts.
  await deps.writer.verifySteps(2, 'removal');
  await confirmRemainingQuorum(deps, observed, action.memberId, endpoints);
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

export async function runMembershipAction(deps: ExecutorDeps, observed: Observed, action: MembershipAction): Promise<void> {
  switch (action.kind) {
    case 'InitCluster':
      return initCluster(deps, observed, action.machine);
    case 'AddLearner':
      return addLearner(deps, observed, action);
    case 'StartMember':
      return startMember(deps, observed, action);
    case 'PromoteLearner':
      return promoteLearner(deps, observed, action);
    case 'MoveLeader':
      return moveLeader(deps, observed, action);
    case 'RemoveMember':
      return removeMember(deps, observed, action);
  }
}

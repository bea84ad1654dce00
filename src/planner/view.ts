import type { MachinePhase } from '../domain/machine.ts';
import type { EtcdMemberStatus } from '../ports/etcd-admin.ts';
import { agreedLeader, isHealthyVoter, namesLeader, namesNoLeader as readingNamesNoLeader, votersHoldQuorum, type VoterReading } from './health.ts';
import type { Observed, ObservedMachine, ObservedMember, PlannerSpec } from './types.ts';
import { learnerLimitInForce } from '../domain/learner-limit.ts';
import { keptByDowngrade, minorOf, pendingDowngrade, versionStep, type PendingDowngrade, type VersionStep } from '../api/version-path.ts';

/** A learner counts as caught up when its applied index is this close to the leader's raft index. */
export const CATCH_UP_MARGIN = 10;

/**
 * Everything plan() derives from one observation, computed once: machine <-> member matching by peer
 * URL (never by name: an unstarted learner has none), health, leader and the machine sets.
 */
export interface ClusterView {
  spec: PlannerSpec;
  observed: Observed;
  now: number;
  membersKnown: boolean;
  members: ObservedMember[];
  voters: ObservedMember[];
  learners: ObservedMember[];
  healthyVoters: ObservedMember[];
  /** The voters hold quorum (votersHoldQuorum, planner/health.ts), judged once per view. */
  hasQuorum: boolean;
  /** The leader the voters agree on (agreedLeader, planner/health.ts); undefined when disputed or named by none. */
  leaderId: string | undefined;
  leaderStatus: EtcdMemberStatus | undefined;
  memberOf: (machine: ObservedMachine) => ObservedMember | undefined;
  machineOf: (member: ObservedMember) => ObservedMachine | undefined;
  /** Not failed and not picked for deletion. */
  active: ObservedMachine[];
  isOutdated: (machine: ObservedMachine) => boolean;
  /** A voter judged by isHealthyVoter (planner/health.ts) on its readingOf; a learner never is. */
  isHealthyVoter: (member: ObservedMember) => boolean;
  /** A member as the health rules (planner/health.ts) read it: its answer, and whether its machine runs it. */
  readingOf: (member: ObservedMember) => VoterReading;
  /**
   * Machines whose member runs without etcd's add and removal checks (recorded as started with
   * `--strict-reconfig-check=false`), whatever the spec says now: after a switch back to `etcd` they
   * run so until rolled.
   */
  uncheckedMembers: string[];
  /**
   * How many learners etcd accepts now: the lowest --max-learners of the spec's launch and of every
   * member that runs (or has been a voter), from what each was started with; during a rollout or a
   * change of the setting, the old members' limit holds until they are gone.
   */
  learnerLimit: number;
  /** Why machines roll to `spec.version` rather than the desired version now (a hop of the upgrade path). */
  versionHop?: string;
  /**
   * A downgrade by etcd's protocol while members run a higher minor than the spec: they are restarted
   * in place (a lower-version member cannot join), so no machine is replaced for it.
   */
  downgrade?: PendingDowngrade;
}

export function peerURLOf(machine: ObservedMachine): string | undefined {
  return machine.infra?.peerURL ?? machine.record.peerURL;
}

export function clientURLOf(machine: ObservedMachine): string | undefined {
  return machine.infra?.clientURL ?? machine.record.clientURL;
}

function answeringStatus(member: ObservedMember): EtcdMemberStatus | undefined {
  return member.status?.ok === true ? member.status.status : undefined;
}

/** A member's status answer as the health rules read it, without its machine (see ClusterView.readingOf). */
export function memberReading(member: ObservedMember): VoterReading {
  const status = answeringStatus(member);
  return { id: member.id, name: member.name, ...(status === undefined ? {} : { leaderId: status.leaderId }) };
}

/**
 * A member answers its own status and knows a leader. Status errors are not held against it: etcd
 * lists raised alarms there (NOSPACE), and a member with an alarm still votes; alarms gate joins
 * through the preflight instead of counting as lost quorum.
 */
export function memberAnswers(member: ObservedMember): boolean {
  return namesLeader(memberReading(member));
}

/** Answers its own status but names no leader: mid-election, or cut off from its peers. */
export function namesNoLeader(member: ObservedMember): boolean {
  return readingNamesNoLeader(memberReading(member));
}

export function buildView(desired: PlannerSpec, observed: Observed, now: number): ClusterView {
  // A rollout across a minor may first pass through the older minor's newest patch (etcd's upgrade
  // guide): until every member runs it, that patch is the version machines are rolled to.
  const running = observed.machines.map((m) => m.record.version);
  const downgrade = pendingDowngrade(running, desired.version);
  const step: VersionStep = downgrade ? { version: downgrade.running } : versionStep(running, desired.version);
  const spec: PlannerSpec = step.version === desired.version ? desired : { ...desired, version: step.version };
  // A member the downgrade restarts in place starts with the spec's template (flags) as well: its other
  // differences (the learner limit that follows the minor) are no reason to replace it first.
  const restartsInPlace = (machine: ObservedMachine): boolean => downgrade !== undefined && minorOf(machine.record.version) === downgrade.from;
  const members = observed.members.ok ? observed.members.list : [];
  const byPeer = new Map<string, ObservedMachine>();
  for (const machine of observed.machines) {
    const url = peerURLOf(machine);
    if (url !== undefined) byPeer.set(url, machine);
  }
  const machineOf = (member: ObservedMember): ObservedMachine | undefined => {
    for (const url of member.peerURLs) {
      const machine = byPeer.get(url);
      if (machine) return machine;
    }
    return undefined;
  };
  const memberByMachine = new Map<string, ObservedMember>();
  for (const member of members) {
    const machine = machineOf(member);
    if (machine) memberByMachine.set(machine.record.name, member);
  }
  // Each member is read once per view: the rules ask for readings many times per plan.
  const readings = new Map<ObservedMember, VoterReading>();
  const readingOf = (member: ObservedMember): VoterReading => {
    const known = readings.get(member);
    if (known !== undefined) return known;
    const running = machineOf(member)?.infra?.memberRunning;
    const reading = { ...memberReading(member), ...(running === undefined ? {} : { running }) };
    readings.set(member, reading);
    return reading;
  };
  const voters = members.filter((m) => !m.isLearner);
  const health = new Map<ObservedMember, boolean>();
  const isVoterHealthy = (member: ObservedMember): boolean => {
    const known = health.get(member);
    if (known !== undefined) return known;
    const healthy = !member.isLearner && isHealthyVoter(readingOf(member));
    health.set(member, healthy);
    return healthy;
  };
  const leader = voters.find((m) => m.id === agreedLeader(voters.map(readingOf)));
  return {
    spec,
    observed,
    now,
    membersKnown: observed.members.ok,
    members,
    voters,
    learners: members.filter((m) => m.isLearner),
    healthyVoters: voters.filter(isVoterHealthy),
    hasQuorum: votersHoldQuorum(voters.map(readingOf)),
    leaderId: leader?.id,
    leaderStatus: leader ? answeringStatus(leader) : undefined,
    memberOf: (machine) => memberByMachine.get(machine.record.name),
    machineOf,
    active: observed.machines.filter((m) => !m.record.failed && !m.record.deleteRequested),
    isOutdated: (machine) => (downgrade ? !keptByDowngrade(downgrade, machine.record.version) : machine.record.version !== spec.version) || (machine.record.templateHash !== spec.templateHash && !restartsInPlace(machine)),
    isHealthyVoter: isVoterHealthy,
    readingOf,
    uncheckedMembers: observed.machines
      .filter((m) => m.record.strictReconfigCheck === false && (memberByMachine.has(m.record.name) || m.infra?.memberRunning === true))
      .map((m) => m.record.name),
    ...(step.hop === undefined ? {} : { versionHop: step.hop }),
    ...(downgrade === undefined ? {} : { downgrade }),
    learnerLimit: learnerLimitInForce(
      spec.maxLearners,
      observed.machines.filter((m) => m.infra?.memberRunning === true || memberByMachine.get(m.record.name)?.isLearner === false).map((m) => m.record),
    ),
  };
}

/** Errors a member lists in its status (alarms, "no leader"): they hold promotion and convergence. */
export function statusErrors(member: ObservedMember): string[] {
  return answeringStatus(member)?.errors ?? [];
}



/** How far a learner has applied against the leader's raft index; undefined while it does not answer. */
export function learnerProgress(view: ClusterView, learner: ObservedMember): { applied: number; target: number } | undefined {
  const status = answeringStatus(learner);
  if (!status || !view.leaderStatus) return undefined;
  return { applied: status.raftAppliedIndex, target: view.leaderStatus.raftIndex };
}

export function isCaughtUp(view: ClusterView, learner: ObservedMember): boolean {
  const progress = learnerProgress(view, learner);
  return progress !== undefined && progress.applied >= progress.target - CATCH_UP_MARGIN;
}

/** The phase a machine is in, as this observation shows it. */
export function phaseOf(view: ClusterView, machine: ObservedMachine): MachinePhase {
  const { record, infra } = machine;
  if (record.failed) return 'Failed';
  if (infra?.state === 'Deleting' || record.deleteRequested) return 'Deleting';
  if (!infra) return record.phase === 'Pending' ? 'Pending' : record.phase;
  if (infra.state === 'Failed') return 'Failed';
  if (infra.state === 'Provisioning') return 'Provisioning';
  // Without a member list, keep what was last known rather than guess.
  if (!view.membersKnown && ['Initializing', 'Joining', 'Learner', 'Voter'].includes(record.phase)) return record.phase;
  const member = view.memberOf(machine);
  if (!member) {
    if (view.observed.initMachine === record.name && infra.memberRunning) return 'Initializing';
    return 'Provisioned';
  }
  if (!member.isLearner) return 'Voter';
  return memberAnswers(member) ? 'Learner' : 'Joining';
}

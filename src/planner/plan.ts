import type { RemediationRecord } from '../domain/machine.ts';
import { keepsQuorum, quorum } from '../domain/quorum.ts';
import { nextRemediation } from '../domain/remediation.ts';
import { selectVictims, type VictimCandidate } from '../domain/selection.ts';
import { planCare } from './care.ts';
import { conditionsFor } from './conditions.ts';
import { creations } from './creation.ts';
import { abandonInit, initNeverStarted } from './init-retry.ts';
import { guardAdd, guardPromotion } from './guard.ts';
import { preflightForAdd } from './preflight.ts';
import { removal } from './removal.ts';
import { activeMachines, byOrdinal, isGone, isReadyVoter, nameOf, type Step } from './step.ts';
import type {
  Decision,
  MachineAction,
  MarkMachineFailed,
  MembershipAction,
  Observed,
  ObservedMachine,
  ObservedMember,
  PlannerSpec,
  RequestMachineDeletion,
  RestartMember,
  Wait,
} from './types.ts';
import { buildView, hasQuorum, isCaughtUp, learnerProgress, memberAnswers, namesNoLeader, phaseOf, statusErrors, type ClusterView } from './view.ts';

/** Least time between two restarts of a member that keeps exiting (a member starts in 1-2 s). */
export const MEMBER_RESTART_BACKOFF_MS = 2000;

/** Poll intervals: fast while etcd is about to change (catch-up, 5 s rule), slower while machines provision. */
export const REQUEUE = { now: 0, fast: 100, retry: 250, slow: 500, idle: 5000 } as const;

/**
 * etcd refusals that lapse by themselves within a few hundred ms (the 5 s rule's clock, a learner's
 * raft match catching up with what its status already shows): the run retries them at the fast
 * interval, since a refusal costs etcd next to nothing and every 100 ms waited is promotion latency.
 */
export const FAST_RETRY: ReadonlySet<string> = new Set(['UnhealthyCluster', 'NotInSync']);

/**
 * Remediation limits as KCP applies them: a sequence of failures within minHealthyPeriod counts
 * retries; retries wait retryPeriod apart and stop at maxRetry. Returns a wait when not allowed now.
 */
function remediationGate(step: Step, last: RemediationRecord | undefined): Wait | undefined {
  const { spec, now } = step.view;
  if (!last || now - last.at >= spec.remediation.minHealthyPeriodMs) return undefined;
  if (now - last.at < spec.remediation.retryPeriodMs) {
    return { code: 'RemediationDeferred', message: `last remediation (${last.machine}) was less than retryPeriod ago` };
  }
  if (last.retryCount >= spec.remediation.maxRetry) {
    return { code: 'CannotBeRemediated', message: `remediation retried ${String(last.retryCount)} times (maxRetry ${String(spec.remediation.maxRetry)})` };
  }
  return undefined;
}

function failureOf(step: Step, machine: ObservedMachine): { reason: string; message: string } | undefined {
  const { view } = step;
  const { record, infra } = machine;
  if (infra?.state === 'Failed') return { reason: 'ProvisioningFailed', message: infra.failureMessage ?? 'provisioning failed' };
  if (!infra) return record.phase === 'Pending' ? undefined : { reason: 'MachineMissing', message: 'the provider no longer has this machine' };
  const initFailure = initNeverStarted(view, machine);
  if (initFailure) return initFailure;
  if (!view.membersKnown) return undefined;
  const member = view.memberOf(machine);
  if (!member) {
    if (record.memberId !== undefined) return { reason: 'MemberLost', message: `member ${record.memberId} left the cluster` };
    return undefined;
  }
  if (member.isLearner) return learnerFailure(step, machine);
  const since = record.unhealthySince;
  if (since !== undefined && view.now - since >= view.spec.remediation.unhealthyAfterMs && !view.isHealthyVoter(member) && hasQuorum(view)) {
    return { reason: 'MemberUnhealthy', message: `member unhealthy since ${String(view.now - since)} ms (unhealthyAfter ${String(view.spec.remediation.unhealthyAfterMs)} ms)` };
  }
  return undefined;
}

function learnerFailure(step: Step, machine: ObservedMachine): { reason: string; message: string } | undefined {
  const { infra, record } = machine;
  if (!infra) return undefined;
  if (!infra.memberRunning && infra.memberStartedAt !== undefined) {
    return { reason: 'LearnerExited', message: 'the learner process exited before promotion' };
  }
  // A caught-up learner is waiting for its promotion, not stuck (an idle cluster writes nothing).
  const member = step.view.memberOf(machine);
  if (member && isCaughtUp(step.view, member)) return undefined;
  const lastProgress = record.learnerProgress?.at ?? infra.memberStartedAt;
  if (infra.memberRunning && lastProgress !== undefined && step.view.now - lastProgress >= step.view.spec.remediation.learnerStuckAfterMs) {
    return { reason: 'LearnerStuck', message: `learner made no progress for ${String(step.view.now - lastProgress)} ms` };
  }
  return undefined;
}

function detectFailures(step: Step): MarkMachineFailed[] {
  const { view } = step;
  const marks: MarkMachineFailed[] = [];
  // Each mark is a remediation, counted as the executor will record it: several failures found in one
  // pass are retries of one sequence, so maxRetry holds within a pass too.
  let last = view.observed.lastRemediation;
  for (const machine of [...step.view.observed.machines].sort(byOrdinal)) {
    if (isGone(step, machine)) continue;
    const failure = failureOf(step, machine);
    if (!failure) continue;
    // Failed provisioning obeys KCP's retry limits like failed health: a provider that always fails
    // would otherwise be asked for replacements forever. A machine the provider lost is replaced at once.
    const gate = failure.reason === 'MachineMissing' ? undefined : remediationGate(step, last);
    if (gate) {
      // The failure itself (for a provider, its last error) is what the user needs to act on.
      const wait: Wait = { ...gate, message: `${gate.message}; ${nameOf(machine)}: ${failure.reason}: ${failure.message}`, machine: nameOf(machine) };
      if (gate.code === 'CannotBeRemediated') step.blocked = wait;
      step.waits.push(wait);
      continue;
    }
    marks.push({ kind: 'MarkMachineFailed', machine: nameOf(machine), ...failure });
    step.failed.add(nameOf(machine));
    last = nextRemediation(last, nameOf(machine), view.now, view.spec.remediation.minHealthyPeriodMs);
  }
  return marks;
}

function victimCandidate(step: Step, machine: ObservedMachine): VictimCandidate {
  const member = step.view.memberOf(machine);
  const candidate: VictimCandidate = {
    name: nameOf(machine),
    ordinal: machine.record.ordinal,
    createdAt: machine.record.createdAt,
    // A learner has no vote: removing it never touches quorum or leadership, so it goes before any
    // voter. Ranked as a voter, "oldest first" could pick the last voter over a learner, which can
    // never leave (LastVoter) and, under the serial strategy, deadlocks once that learner is gone.
    notMember: member === undefined || member.isLearner,
    unhealthy: member !== undefined && !member.isLearner && !step.view.isHealthyVoter(member),
    outdated: step.view.isOutdated(machine),
  };
  if (machine.record.failureDomain !== undefined) candidate.failureDomain = machine.record.failureDomain;
  return candidate;
}

/** Scale down and rollout: which machines to let go now. Their member removals then go one at a time. */
function requestDeletions(step: Step): RequestMachineDeletion[] {
  const { view } = step;
  if (!view.membersKnown) return [];
  const { replicas, maxSurge } = view.spec;
  const active = activeMachines(step);
  const outdated = active.filter(view.isOutdated);
  let pool = active;
  let excess = active.length - replicas;
  let reason = 'ScaleDown';
  if (outdated.length > 0) {
    pool = outdated;
    reason = 'RollingOut';
    if (maxSurge > 0) {
      const readyUpToDate = active.filter((m) => !view.isOutdated(m) && isReadyVoter(view, m)).length;
      excess = Math.max(outdated.length - Math.max(0, replicas - readyUpToDate), active.length - (replicas + maxSurge));
    } else {
      // Remove first, then add: only from a fully healthy cluster at its size, one machine at a time.
      const allReady = active.length >= replicas && active.every((m) => isReadyVoter(view, m)) && view.learners.length === 0;
      excess = allReady ? active.length - replicas + 1 : active.length - replicas;
    }
  }
  if (excess <= 0) return [];
  const victims = selectVictims(pool.map((m) => victimCandidate(step, m)), excess);
  return victims.map((v) => {
    step.leaving.add(v.name);
    return { kind: 'RequestMachineDeletion', machine: v.name, reason };
  });
}

/** Tear down machines that are failed or leaving and no longer have a member (invariant 5). */
function teardowns(step: Step): MachineAction[] {
  const { view } = step;
  const actions: MachineAction[] = [];
  for (const machine of view.observed.machines) {
    if (!isGone(step, machine)) continue;
    const neverJoined = !machine.infra || machine.infra.state !== 'Provisioned' || (machine.record.memberId === undefined && !machine.infra.memberRunning);
    if (!view.membersKnown && !neverJoined) continue;
    if (view.memberOf(machine)) continue;
    // Deleting: each DeleteMachine moves the teardown on until the machine is gone (observing never does).
    if (machine.infra?.state === 'Deleting') step.waits.push({ code: 'MachineDeleting', message: `machine ${nameOf(machine)} is being deleted`, machine: nameOf(machine) });
    actions.push({ kind: 'DeleteMachine', machine: nameOf(machine), reason: step.failed.has(nameOf(machine)) ? 'Remediation' : 'NoLongerNeeded' });
  }
  return actions;
}

function repair(step: Step): MembershipAction | undefined {
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

/** Remediation first, then rollout and scale-down victims: one member leaves per decision. */
function departures(step: Step): MembershipAction | undefined {
  const { view } = step;
  const leavingVoters = view.voters
    .map((member) => ({ member, machine: view.machineOf(member) }))
    .filter((x): x is { member: ObservedMember; machine: ObservedMachine } => x.machine !== undefined && isGone(step, x.machine))
    .sort((a, b) => {
      const failedFirst = Number(step.leaving.has(nameOf(a.machine))) - Number(step.leaving.has(nameOf(b.machine)));
      const unhealthyFirst = Number(view.isHealthyVoter(a.member)) - Number(view.isHealthyVoter(b.member));
      return failedFirst || unhealthyFirst || byOrdinal(a.machine, b.machine);
    });
  for (const { member, machine } of leavingVoters) {
    const reason = step.failed.has(nameOf(machine)) ? 'Remediation' : view.isOutdated(machine) ? 'RollingOut' : 'ScaleDown';
    const action = removal(step, member, reason, machine);
    if (action) return action;
  }
  return undefined;
}

function provisionedAt(m: ObservedMachine): number {
  return m.record.phaseTimes.Provisioned ?? m.record.createdAt;
}

function joinCandidates(step: Step): ObservedMachine[] {
  const { view } = step;
  return activeMachines(step)
    .filter((m) => m.infra?.state === 'Provisioned' && !m.infra.memberRunning && !view.memberOf(m))
    .sort((a, b) => Number(view.isOutdated(a)) - Number(view.isOutdated(b)) || provisionedAt(a) - provisionedAt(b) || byOrdinal(a, b));
}

function scaleUp(step: Step): MembershipAction | undefined {
  const next = joinCandidates(step)[0];
  if (!next) return undefined;
  const reasons = [...preflightForAdd(step.view), ...guardAdd(step.view)];
  if (reasons.length > 0) {
    // A taken learner slot is the normal gate, reported by promote(); the rest explain the hold.
    step.waits.push(...reasons.filter((r) => r.code !== 'LearnerSlotTaken').map((r) => ({ ...r, message: `${nameOf(next)} waits at the join gate: ${r.message}` })));
    return undefined;
  }
  return { kind: 'AddLearner', machine: nameOf(next), reason: 'JoinNextMachine' };
}

function promote(step: Step): MembershipAction | undefined {
  const { view } = step;
  for (const learner of view.learners) {
    const machine = view.machineOf(learner);
    if (!machine || isGone(step, machine)) continue;
    const name = nameOf(machine);
    const progress = learnerProgress(view, learner);
    if (!memberAnswers(learner) || !progress) {
      step.waits.push({ code: 'LearnerStarting', message: `waiting for learner ${name} to answer its status`, machine: name });
      continue;
    }
    const errors = statusErrors(learner);
    if (errors.length > 0) {
      step.waits.push({ code: 'LearnerReportsErrors', message: `learner ${name} reports ${errors.join('; ')}`, machine: name });
      continue;
    }
    if (!isCaughtUp(view, learner)) {
      step.waits.push({ code: 'LearnerCatchingUp', message: `waiting for learner ${name} to catch up (applied ${String(progress.applied)}/${String(progress.target)})`, machine: name });
      continue;
    }
    if (!keepsQuorum(view.voters.length, view.healthyVoters.length, 1, 1)) {
      step.waits.push({ code: 'QuorumWouldBreak', message: `promoting ${name} would leave too few healthy voters`, machine: name });
      continue;
    }
    const guard = guardPromotion(view, learner);
    if (guard.length > 0) {
      step.waits.push(...guard.map((w) => ({ ...w, machine: name })));
      continue;
    }
    return { kind: 'PromoteLearner', machine: name, memberId: learner.id, reason: 'LearnerCaughtUp' };
  }
  return undefined;
}

function initialize(step: Step): MembershipAction | undefined {
  const first = activeMachines(step)
    .filter((m) => m.infra?.state === 'Provisioned')
    .sort((a, b) => provisionedAt(a) - provisionedAt(b) || byOrdinal(a, b))[0];
  if (!first) {
    step.waits.push({ code: 'WaitingForFirstMachine', message: 'no cluster yet: the first machine to finish provisioning initializes it' });
    return undefined;
  }
  return { kind: 'InitCluster', machine: nameOf(first), reason: 'FirstMachineProvisioned' };
}

/**
 * Members whose process stopped on a machine that is still provisioned and not leaving: the init
 * machine and machines that have been voters (with a readable list, only those etcd still lists as
 * voters). Their data dirs hold them, so a start brings each back as itself.
 */
function stoppedMembers(step: Step): ObservedMachine[] {
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
const mayBootstrap = (view: ClusterView, m: ObservedMachine): boolean => nameOf(m) === view.observed.initMachine && m.record.phaseTimes.Voter === undefined;

/** Not again within MEMBER_RESTART_BACKOFF_MS of its last start: a member that keeps exiting is not respawned in a tight loop. */
function restartDue(step: Step, m: ObservedMachine): boolean {
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
function restartsWithoutQuorum(step: Step): RestartMember[] {
  const { view } = step;
  if (view.membersKnown && hasQuorum(view)) return [];
  return stoppedMembers(step)
    .filter((m) => !mayBootstrap(view, m) && restartDue(step, m))
    .map((m) => ({ kind: 'RestartMember', machine: nameOf(m), reason: view.membersKnown ? 'QuorumLost' : 'MemberListUnavailable' }));
}

/** The priority ladder: repair > remediation > rollout/scale down > scale up > promote. */
function membership(step: Step): MembershipAction | undefined {
  const { view } = step;
  const { observed } = view;
  if (observed.initMachine === undefined && view.membersKnown && view.members.length === 0) return initialize(step);
  if (!view.membersKnown) {
    const init = stoppedMembers(step).find((m) => mayBootstrap(view, m));
    if (init && restartDue(step, init)) return { kind: 'StartMember', machine: nameOf(init), initialClusterState: 'new', reason: 'RestartInitMember' };
    step.waits.push({ code: 'MemberListUnavailable', message: `cannot read the etcd member list: ${observed.members.ok ? '' : observed.members.error}` });
    return undefined;
  }
  if (!hasQuorum(view)) {
    // A leader transfer or election leaves voters answering with no leader named for a moment; say so,
    // so that a brief Blocked (well inside the run's grace) does not read as members being down.
    const leaderless = view.voters.filter(namesNoLeader).length;
    const electing = leaderless === 0 ? '' : `; ${String(leaderless)} answer but name no leader (an election, or peers that cannot reach each other)`;
    step.blocked = {
      code: 'QuorumLost',
      message: `only ${String(view.healthyVoters.length)} of ${String(view.voters.length)} voters are healthy (quorum ${String(quorum(view.voters.length))})${electing}; membership cannot change`,
    };
    step.waits.push(step.blocked);
    return undefined;
  }
  return repair(step) ?? departures(step) ?? scaleUp(step) ?? promote(step);
}

function explainRefusal(step: Step, action: MembershipAction | undefined): void {
  const last = step.view.observed.lastMembershipAttempt;
  if (!action || !last?.errorKind || last.action !== action.kind) return;
  const why: Record<string, string> = {
    UnhealthyCluster: "etcd refused: leader not connected to every voter for 5 s yet (etcd's peer-connection rule); retrying",
    NotInSync: 'etcd says the learner is not in sync with the leader yet; retrying',
    TooManyLearners: 'etcd says the learner slot is taken; re-observing',
  };
  step.waits.push({ code: `Retry${last.errorKind}`, message: why[last.errorKind] ?? `last ${last.action} failed: ${last.error ?? last.errorKind}; retrying` });
}

function isConverged(step: Step, actions: number): boolean {
  const { view } = step;
  const { machines } = view.observed;
  return (
    actions === 0 &&
    view.membersKnown &&
    view.voters.length === view.spec.replicas &&
    view.learners.length === 0 &&
    view.healthyVoters.length === view.voters.length &&
    view.voters.every((m) => statusErrors(m).length === 0) &&
    view.observed.alarms.length === 0 &&
    machines.length === view.spec.replicas &&
    machines.every((m) => !isGone(step, m) && !view.isOutdated(m) && isReadyVoter(view, m))
  );
}

/** Waits that end within a few hundred ms, on etcd's side or as readings accumulate. */
const FAST_WAITS = new Set(['VoterUnhealthy', 'VoterOutOfStep', 'ConnectivityUnproven', 'VotersNotConnected', 'PromotionQuorumUnproven']);

/**
 * Soonest a provisioning machine is expected ready, from the provider's hint: the pass that sees it
 * ready runs then, not up to a poll interval later (1 ms after, so the machine is ready when read).
 */
function untilExpectedReady(step: Step): number | undefined {
  const { now } = step.view;
  const due = activeMachines(step).flatMap((m) => (m.infra?.state === 'Provisioning' && m.infra.expectedReadyAt !== undefined ? [m.infra.expectedReadyAt - now + 1] : []));
  return due.length === 0 ? undefined : Math.max(1, Math.min(...due));
}

function requeueAfter(step: Step, actions: number, converged: boolean): number {
  if (actions > 0) return REQUEUE.now;
  if (converged) return REQUEUE.idle;
  if (step.waits.some((w) => w.code.startsWith('Retry'))) return REQUEUE.retry;
  if (step.view.learners.length > 0 || step.waits.some((w) => FAST_WAITS.has(w.code))) return REQUEUE.fast;
  return Math.min(REQUEUE.slow, untilExpectedReady(step) ?? REQUEUE.slow);
}

/**
 * The whole decision procedure: pure, synchronous, deterministic. Any number of machine actions, at
 * most one membership action, and a reason for every action and every wait.
 */
export function plan(spec: PlannerSpec, observed: Observed, now: number): Decision {
  return planFromView(buildView(spec, observed, now));
}

/** plan() for a view the caller already built (the reconciler records from the same view). */
export function planFromView(view: ClusterView): Decision {
  const { observed } = view;
  const step: Step = {
    view,
    failed: new Set(observed.machines.filter((m) => m.record.failed).map(nameOf)),
    leaving: new Set(observed.machines.filter((m) => m.record.deleteRequested).map(nameOf)),
    waits: [],
  };
  const machineActions: MachineAction[] = [...detectFailures(step), ...requestDeletions(step)];
  machineActions.push(...creations(step), ...teardowns(step), ...restartsWithoutQuorum(step));
  const abandon = abandonInit(view);
  if (abandon) machineActions.push(abandon);
  const membershipAction = membership(step);
  explainRefusal(step, membershipAction);
  const actionCount = machineActions.length + (membershipAction ? 1 : 0);
  const converged = isConverged(step, actionCount);
  // Care changes no membership and takes no machine: it does not count against convergence.
  const care = planCare(view, { converged, membershipBusy: membershipAction !== undefined });
  step.waits.push(...care.waits);
  const phases: Record<string, ReturnType<typeof phaseOf>> = {};
  for (const m of observed.machines) phases[nameOf(m)] = step.failed.has(nameOf(m)) ? 'Failed' : phaseOf(view, m);
  const decision: Decision = {
    machineActions,
    waits: step.waits,
    conditions: [...conditionsFor(view, step.waits, { failed: step.failed, leaving: step.leaving, converged }), ...care.conditions],
    requeueAfterMs: Math.min(requeueAfter(step, actionCount, converged), care.nextDueInMs ?? Infinity),
    converged,
    phases,
  };
  if (membershipAction) decision.membershipAction = membershipAction;
  if (care.actions.length > 0) decision.careActions = care.actions;
  if (step.blocked) decision.blocked = step.blocked;
  return decision;
}

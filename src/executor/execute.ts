import type { ControlPlane } from '../api/control-plane.ts';
import { parseDuration } from '../api/duration.ts';
import { InvalidInputError } from '../api/errors.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../domain/machine.ts';
import { quorum } from '../domain/quorum.ts';
import { machineTemplateHash } from '../planner/spec.ts';
import type {
  Action,
  AddLearner,
  CareAction,
  CreateMachine,
  Decision,
  LastMembershipAttempt,
  MachineAction,
  MembershipAction,
  MoveLeader,
  Observed,
  ObservedMember,
  PromoteLearner,
  RemoveMember,
  StartMember,
} from '../planner/types.ts';
import { peerURLOf } from '../planner/view.ts';
import type { CarePort } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import { EtcdAdminError, type EtcdAdmin, type EtcdMember } from '../ports/etcd-admin.ts';
import type { InfraProvider, MemberLaunch } from '../ports/machine-provider.ts';
import { FencedOutError, StoreRefusedError, type StateStore } from '../ports/state-store.ts';
import { FailpointCrash, type FailpointHook } from './failpoints.ts';
import { RenewDeadlineHoldError, type FencedWriter } from '../lease/fenced-writer.ts';
import { launchedLearnerLimit } from '../domain/learner-limit.ts';

export interface ExecutorDeps {
  cluster: string;
  etcd: EtcdAdmin;
  provider: InfraProvider;
  /** Reads; every write goes through `writer`, fenced by the cluster's lease. */
  store: StateStore;
  writer: FencedWriter;
  clock: Clock;
  failpoint: FailpointHook;
  /** Every recorded event is also passed here (progress display, logs). */
  notify?: (event: EventRecord) => void;
  /** Backups, certificates and NOSPACE recovery; without it care actions fail (the simulator plans none). */
  care?: CarePort;
}

export interface ExecutionReport {
  /** Set when the membership action failed (etcd refusal, timeout): the next plan explains and retries. */
  membershipAttempt?: LastMembershipAttempt;
  machineErrors: { action: MachineAction; error: string }[];
}

async function controlPlane(deps: ExecutorDeps): Promise<ControlPlaneRecord> {
  const record = await deps.store.getControlPlane(deps.cluster);
  if (!record) throw new Error(`control plane ${deps.cluster} has no record`);
  return record;
}

async function machineRecord(deps: ExecutorDeps, name: string): Promise<MachineRecord> {
  const record = await deps.store.getMachine(deps.cluster, name);
  if (!record) throw new Error(`machine ${name} has no record`);
  return record;
}

async function emit(deps: ExecutorDeps, event: Omit<EventRecord, 'cluster'>): Promise<void> {
  const full: EventRecord = { cluster: deps.cluster, ...event };
  await deps.writer.commit({ kind: 'AppendEvent', event: full });
  deps.notify?.(full);
}

/** The machine an action concerns; a RemoveMember of an orphan member has none. */
function machineOf(action: Action): string | undefined {
  return 'machine' in action ? action.machine : undefined;
}

function describeAction(action: Action): string {
  const machine = machineOf(action);
  return machine === undefined ? action.kind : `${action.kind} ${machine}`;
}

/** Voter client URLs, leader first: membership calls go to voters only (learners refuse them). */
function voterEndpoints(observed: Observed, exceptMemberId?: string): string[] {
  if (!observed.members.ok) return [];
  const voters = observed.members.list.filter((m) => !m.isLearner && m.id !== exceptMemberId && m.clientURLs.length > 0);
  const leaderIds = new Set(voters.map((m) => (m.status?.ok ? m.status.status.leaderId : '')));
  const isLeader = (m: ObservedMember): boolean => leaderIds.has(m.id);
  return [...voters].sort((a, b) => Number(isLeader(b)) - Number(isLeader(a))).flatMap((m) => m.clientURLs.slice(0, 1));
}

function memberNameFor(observed: Observed, member: EtcdMember): string {
  if (member.name !== '') return member.name;
  const machine = observed.machines.find((m) => {
    const url = peerURLOf(m);
    return url !== undefined && member.peerURLs.includes(url);
  });
  return machine?.record.name ?? `member-${member.id}`;
}

/** etcd --initial-cluster for a joining member: exactly the current membership, by peer URL. */
export function initialClusterFor(observed: Observed, members: readonly EtcdMember[]): string {
  return members.flatMap((m) => m.peerURLs.map((url) => `${memberNameFor(observed, m)}=${url}`)).join(',');
}

export function launchFor(cp: ControlPlaneRecord, machine: MachineRecord, initialCluster: string, state: 'new' | 'existing'): MemberLaunch {
  const spec: ControlPlane['spec'] = cp.manifest.spec;
  const launch: MemberLaunch = {
    memberName: machine.name,
    version: machine.version,
    initialCluster,
    initialClusterState: state,
    clusterToken: cp.clusterToken,
    maxLearners: launchedLearnerLimit(machine.version, spec.etcd.maxLearners),
  };
  if (spec.etcd.quotaBackendBytes !== undefined) launch.quotaBackendBytes = spec.etcd.quotaBackendBytes;
  if (spec.etcd.reconfigurationCheck === 'fastplane') launch.strictReconfigCheck = false;
  // Only a member that starts the cluster ('new') restores: joiners get the data from the leader.
  if (state === 'new' && cp.restoreFrom !== undefined) launch.restoreFrom = cp.restoreFrom;
  return launch;
}

/**
 * Starts the machine's member, first recording how (etcd's reconfiguration checks on or off, its
 * learner limit): the planner's guard and learner limit follow what the members run, which lags the
 * spec until they are rolled.
 */
async function startMemberAs(deps: ExecutorDeps, record: MachineRecord, launch: MemberLaunch): Promise<void> {
  const strict = launch.strictReconfigCheck !== false;
  if (record.strictReconfigCheck !== strict || record.maxLearners !== launch.maxLearners) {
    await deps.writer.commit({ kind: 'PatchMachine', name: record.name, set: { strictReconfigCheck: strict, maxLearners: launch.maxLearners } });
  }
  await deps.provider.startMember(deps.cluster, record.name, launch);
}

async function createMachine(deps: ExecutorDeps, action: CreateMachine): Promise<void> {
  const cp = await controlPlane(deps);
  const now = deps.clock.now();
  const record: MachineRecord = {
    cluster: deps.cluster,
    name: action.machine,
    ordinal: action.ordinal,
    version: cp.manifest.spec.version,
    templateHash: machineTemplateHash(cp.manifest),
    createdAt: now,
    phase: 'Pending',
    phaseTimes: { Pending: now },
  };
  if (action.failureDomain !== undefined) record.failureDomain = action.failureDomain;
  await deps.writer.commit({ kind: 'CreateMachine', record }, { kind: 'ReserveOrdinal', ordinal: action.ordinal });
  deps.failpoint('after-create-record');
  await deps.writer.verify();
  const request = { cluster: deps.cluster, name: action.machine, ordinal: action.ordinal, ...(action.failureDomain !== undefined ? { failureDomain: action.failureDomain } : {}) };
  const infra = await deps.provider.create(request);
  deps.failpoint('after-provider-create');
  const latest = await machineRecord(deps, action.machine);
  const at = deps.clock.now();
  await deps.writer.commit({
    kind: 'PatchMachine',
    name: action.machine,
    set: {
      address: infra.address,
      clientURL: infra.clientURL,
      peerURL: infra.peerURL,
      phase: 'Provisioning',
      phaseTimes: { ...latest.phaseTimes, Provisioning: latest.phaseTimes.Provisioning ?? at },
    },
  });
}

/**
 * Provisioning goes on between passes: a machine still Provisioning that no action of this decision
 * concerns is moved on here (an ssh machine waiting for a host, or one a crash left half done), never
 * by describing it, which only reads. A failure to move it on is an event; the provider records a
 * provisioning failure on the machine itself, which the next pass sees as Failed.
 */
function resumeProvisioning(deps: ExecutorDeps, observed: Observed, decision: Decision): Promise<void>[] {
  const acted = new Set(decision.machineActions.map(machineOf));
  return observed.machines
    .filter((m) => m.infra?.state === 'Provisioning' && !acted.has(m.record.name))
    .map(async ({ record }) => {
      try {
        await deps.provider.provision(deps.cluster, record.name);
      } catch (error) {
        if (endsTheRun(error)) throw error;
        const at = deps.clock.now();
        const message = `CreateMachine ${record.name} failed: ${error instanceof Error ? error.message : String(error)}`;
        await emit(deps, { at, endedAt: at, type: 'Warning', reason: 'ResumeCreate', action: 'CreateMachine', outcome: 'Failed', message, machine: record.name });
      }
    });
}

/** Each call moves the teardown on (stop, then wipe when due); the record goes once the machine is gone. */
async function deleteMachine(deps: ExecutorDeps, name: string): Promise<void> {
  deps.failpoint('before-delete-machine');
  await deps.writer.verify();
  await deps.provider.delete(deps.cluster, name);
  deps.failpoint('after-provider-delete');
  if ((await deps.provider.describe(deps.cluster, name)) === undefined) await deps.writer.commit({ kind: 'DeleteMachine', name });
}

async function runMachineAction(deps: ExecutorDeps, action: MachineAction): Promise<void> {
  const now = deps.clock.now();
  switch (action.kind) {
    case 'CreateMachine':
      return createMachine(deps, action);
    case 'DeleteMachine':
      return deleteMachine(deps, action.machine);
    case 'MarkMachineFailed': {
      const cp = await controlPlane(deps);
      // Counted by the store against the stored sequence: failures marked in one pass each count.
      await deps.writer.commit(
        { kind: 'PatchMachine', name: action.machine, set: { failed: { reason: action.reason, message: action.message, at: now } } },
        { kind: 'RecordRemediation', machine: action.machine, at: now, minHealthyPeriodMs: parseDuration(cp.manifest.spec.remediation.minHealthyPeriod) ?? 0 },
      );
      return;
    }
    case 'RequestMachineDeletion':
      await deps.writer.commit({ kind: 'PatchMachine', name: action.machine, set: { deleteRequested: { reason: action.reason, at: now } } });
      return;
    case 'RestartMember': {
      const record = await machineRecord(deps, action.machine);
      if (record.peerURL === undefined) throw new Error(`machine ${action.machine} has no peer URL`);
      await deps.writer.verify();
      // On a data dir etcd ignores --initial-cluster, and without quorum the member list may be unreadable.
      await startMemberAs(deps, record, launchFor(await controlPlane(deps), record, `${action.machine}=${record.peerURL}`, 'existing'));
      return;
    }
    case 'AbandonInit':
      await deps.writer.commit({ kind: 'AbandonInit', machine: action.machine });
      return;
  }
}

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
  if (healthy < quorum(remaining)) {
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

async function runMembershipAction(deps: ExecutorDeps, observed: Observed, action: MembershipAction): Promise<void> {
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


/** Errors that end the run instead of being reported and retried on the next pass. */
function endsTheRun(error: unknown): boolean {
  return error instanceof FailpointCrash || error instanceof InvalidInputError || error instanceof FencedOutError || error instanceof StoreRefusedError;
}

/** etcd answers that say "not now": the planner waits and tries again; everything else failed. */
const REFUSALS: ReadonlySet<string> = new Set(['NotInSync', 'TooManyLearners', 'UnhealthyCluster', 'NotEnoughStartedMembers', 'PeerURLExists', 'BadLeaderTransferee', 'LearnerRpc']);

async function timed(deps: ExecutorDeps, action: Action, run: () => Promise<unknown>): Promise<string | undefined> {
  const at = deps.clock.now();
  const target = machineOf(action);
  const machine = target === undefined ? {} : { machine: target };
  try {
    const detail = await run();
    const said = typeof detail === 'string' && detail !== '' ? `: ${detail}` : '';
    await emit(deps, { at, endedAt: deps.clock.now(), type: 'Normal', reason: action.reason, action: action.kind, outcome: 'Succeeded', message: `${describeAction(action)} (${action.reason})${said}`, ...machine });
    return undefined;
  } catch (error) {
    // A simulated crash, a lost lease, or input the user must fix (a taken address): stop the run.
    if (endsTheRun(error)) throw error;
    const message = error instanceof Error ? error.message : String(error);
    const outcome = (error instanceof EtcdAdminError && REFUSALS.has(error.kind)) || error instanceof RenewDeadlineHoldError ? 'Refused' : 'Failed';
    await emit(deps, { at, endedAt: deps.clock.now(), type: 'Warning', reason: action.reason, action: action.kind, outcome, message: `${describeAction(action)} failed: ${message}`, ...machine });
    return message;
  }
}

function carePort(deps: ExecutorDeps): CarePort {
  if (!deps.care) throw new Error('no day-2 care is wired for this control plane');
  return deps.care;
}

/**
 * A scheduled care job (a backup, maintenance), its outcome recorded on the control plane either way,
 * since the next slot counts from the attempt: a failed backup is the BackupFailing condition until a
 * good one clears it.
 */
async function runScheduled(deps: ExecutorDeps, field: 'lastBackupAttempt' | 'lastMaintenance', job: () => Promise<string>): Promise<string> {
  const at = deps.clock.now();
  await deps.writer.verify();
  let line: string;
  try {
    line = await job();
  } catch (error) {
    if (endsTheRun(error)) throw error;
    const message = error instanceof Error ? error.message : String(error);
    await deps.writer.commit({ kind: 'PatchControlPlane', patch: { [field]: { at, ok: false, message } } });
    throw error;
  }
  await deps.writer.commit({ kind: 'PatchControlPlane', patch: { [field]: { at, ok: true, message: line } } });
  return line;
}

async function runCareAction(deps: ExecutorDeps, action: CareAction): Promise<string> {
  switch (action.kind) {
    case 'TakeBackup':
      return runScheduled(deps, 'lastBackupAttempt', () => carePort(deps).takeBackup(action.keep));
    case 'RenewCertificates':
      return `renewed ${(await carePort(deps).renewCertificates(deps.writer)).join(', ')}`;
    case 'RecoverNoSpace':
      return (await carePort(deps).recoverNoSpace(deps.writer)).join('; ');
    case 'RunMaintenance': {
      const options = { retainRevisions: action.retainRevisions, fragmentationThreshold: action.fragmentationThreshold };
      return runScheduled(deps, 'lastMaintenance', async () => (await carePort(deps).maintain(deps.writer, options)).join('; '));
    }
  }
}

/**
 * Runs one decision: machine actions in parallel, the single membership action alongside them. No
 * retry here: a failure is reported and the next pass re-observes before anything is tried again.
 * Every action is awaited to its end, whatever fails first, so nothing started is left unobserved
 * (a membership call still running while the caller tears down or exits).
 */
export async function execute(deps: ExecutorDeps, observed: Observed, decision: Decision): Promise<ExecutionReport> {
  const report: ExecutionReport = { machineErrors: [] };
  const membership = decision.membershipAction;
  const machineRuns = decision.machineActions.map(async (action) => {
    const error = await timed(deps, action, () => runMachineAction(deps, action));
    if (error !== undefined) report.machineErrors.push({ action, error });
  });
  const membershipRun = (async () => {
    if (!membership) return;
    let caught: unknown;
    const error = await timed(deps, membership, async () => {
      try {
        await runMembershipAction(deps, observed, membership);
      } catch (e) {
        caught = e;
        throw e;
      }
    });
    if (error === undefined) return;
    const attempt: LastMembershipAttempt = { action: membership.kind, target: machineOf(membership) ?? (membership.kind === 'RemoveMember' ? membership.memberId : ''), at: deps.clock.now(), error };
    if (caught instanceof EtcdAdminError) attempt.errorKind = caught.kind;
    report.membershipAttempt = attempt;
  })();
  // Care runs beside the rest: the planner asks for it only where it cannot collide (renewal on a
  // converged cluster, NOSPACE recovery with no membership change).
  const careRuns = (decision.careActions ?? []).map(async (action) => {
    await timed(deps, action, () => runCareAction(deps, action));
  });
  const settled = await Promise.allSettled([...machineRuns, ...resumeProvisioning(deps, observed, decision), membershipRun, ...careRuns]);
  const crash = settled.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (crash) throw crash.reason;
  return report;
}

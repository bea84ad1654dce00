import type { ControlPlane } from '../api/control-plane.ts';
import { InvalidInputError } from '../api/errors.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../domain/machine.ts';
import type { Action, LastMembershipAttempt, MachineAction, Observed, ObservedMember } from '../planner/types.ts';
import { peerURLOf } from '../planner/view.ts';
import type { CarePort } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin, EtcdMember } from '../ports/etcd-admin.ts';
import type { InfraProvider, MemberLaunch } from '../ports/machine-provider.ts';
import { FencedOutError, StoreRefusedError, type StateStore } from '../ports/state-store.ts';
import { FailpointCrash, type FailpointHook } from './failpoints.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { launchedLearnerLimit } from '../domain/learner-limit.ts';
import { peerURLsIn, tokenForLowMemberId } from './member-id.ts';

// What every handler works with: the ports, the lease, and the records and launch settings they share.

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

export async function controlPlane(deps: ExecutorDeps): Promise<ControlPlaneRecord> {
  const record = await deps.store.getControlPlane(deps.cluster);
  if (!record) throw new Error(`control plane ${deps.cluster} has no record`);
  return record;
}

export async function machineRecord(deps: ExecutorDeps, name: string): Promise<MachineRecord> {
  const record = await deps.store.getMachine(deps.cluster, name);
  if (!record) throw new Error(`machine ${name} has no record`);
  return record;
}

export async function emit(deps: ExecutorDeps, event: Omit<EventRecord, 'cluster'>): Promise<void> {
  const full: EventRecord = { cluster: deps.cluster, ...event };
  await deps.writer.commit({ kind: 'AppendEvent', event: full });
  deps.notify?.(full);
}


/** Voter client URLs, leader first: membership calls go to voters only (learners refuse them). */
export function voterEndpoints(observed: Observed, exceptMemberId?: string): string[] {
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
    // Only a member that starts a cluster gets its ID from the token; joiners get theirs from the add.
    clusterToken: state === 'new' ? tokenForLowMemberId(cp.clusterToken, peerURLsIn(initialCluster, machine.name)) : cp.clusterToken,
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
export async function startMemberAs(deps: ExecutorDeps, record: MachineRecord, launch: MemberLaunch): Promise<void> {
  const strict = launch.strictReconfigCheck !== false;
  if (record.strictReconfigCheck !== strict || record.maxLearners !== launch.maxLearners) {
    await deps.writer.commit({ kind: 'PatchMachine', name: record.name, set: { strictReconfigCheck: strict, maxLearners: launch.maxLearners } });
  }
  await deps.provider.startMember(deps.cluster, record.name, launch);
}

/** The machine an action concerns; a RemoveMember of an orphan member has none. */
export function machineOf(action: Action): string | undefined {
  return 'machine' in action ? action.machine : undefined;
}

/** Errors that end the run instead of being reported and retried on the next pass. */
export function endsTheRun(error: unknown): boolean {
  return error instanceof FailpointCrash || error instanceof InvalidInputError || error instanceof FencedOutError || error instanceof StoreRefusedError;
}

/**
 * Small builders for planner inputs, so table tests read as the rule they check.
 *
 * Conventions: machines are named `t-N` (cluster `t`), machine N lives on 127.77.1.N with its peer URL
 * http://127.77.1.N:2380 and client URL http://127.77.1.N:2379 (the planner matches machines to
 * members by peer URL), and its member ID is a decimal uint64 string derived from N.
 */
import { defaultControlPlane } from '../../src/api/control-plane.ts';
import type { LearnerProgress, MachinePhase, MachineRecord } from '../../src/domain/machine.ts';
import { toPlannerSpec } from '../../src/planner/spec.ts';
import type { Observed, ObservedMachine, ObservedMember, PlannerSpec } from '../../src/planner/types.ts';
import type { EtcdAlarm, EtcdMemberStatus } from '../../src/ports/etcd-admin.ts';
import type { InfraState } from '../../src/ports/machine-provider.ts';

/** The planner's clock in every table test. */
export const NOW = 10_000_000;
/** The leader's raft index in built clusters (the catch-up target of learners). */
export const RAFT_INDEX = 1350;

// ---------------------------------------------------------------- spec

export type SpecOverrides = Partial<Omit<PlannerSpec, 'remediation'>> & { remediation?: Partial<PlannerSpec['remediation']> };

/** The planner spec of a default manifest named `t` (3 replicas, 3.4.23, parallel), with overrides. */
export function spec(overrides: SpecOverrides = {}): PlannerSpec {
  const base = toPlannerSpec(defaultControlPlane('t'));
  const { remediation, ...rest } = overrides;
  return { ...base, ...rest, remediation: { ...base.remediation, ...remediation } };
}

// ---------------------------------------------------------------- addressing

/** The ordinal in a machine name (`t-3` -> 3). */
export function ordinalOf(name: string): number {
  const match = /-(\d+)$/.exec(name);
  if (!match) throw new Error(`machine name ${name} has no ordinal`);
  return Number(match[1]);
}

export function addressOf(name: string): string {
  return `127.77.1.${String(ordinalOf(name))}`;
}
export function peerURLOf(name: string): string {
  return `http://${addressOf(name)}:2380`;
}
export function clientURLOf(name: string): string {
  return `http://${addressOf(name)}:2379`;
}

const ID_BASE = 12051755584213283000n;
/** A member ID that does not fit a JS number, as etcd gives them: '12051755584213283430' style. */
export function memberIdOf(name: string): string {
  return (ID_BASE + BigInt(ordinalOf(name))).toString();
}

// ---------------------------------------------------------------- machines

export interface MachineOptions {
  /** Phase in the record; also picks sensible infra defaults (see below). Default 'Provisioned'. */
  phase?: MachinePhase;
  /** Provider state, or 'none' when the provider has no such machine. */
  infra?: InfraState | 'none';
  failureMessage?: string;
  memberRunning?: boolean;
  /** null: never started. */
  memberStartedAt?: number | null;
  failed?: boolean | { reason: string; message: string; at: number };
  deleteRequested?: boolean | { reason: string; at: number };
  version?: string;
  templateHash?: string;
  failureDomain?: string;
  ordinal?: number;
  createdAt?: number;
  /** When the machine reached Provisioned (join order). */
  provisionedAt?: number;
  unhealthySince?: number;
  learnerProgress?: LearnerProgress;
  /** Bytes in the running member's data dir, as the provider reports them. */
  memberDataBytes?: number;
  /** null: no member ID recorded (default: recorded for member phases). */
  memberId?: string | null;
  /** The --max-learners its member was started with (default: not recorded, as before it was kept). */
  maxLearners?: number;
}

const MEMBER_PHASES: readonly MachinePhase[] = ['Initializing', 'Joining', 'Learner', 'Voter'];

function defaultInfraState(phase: MachinePhase): InfraState | 'none' {
  switch (phase) {
    case 'Pending':
      return 'none';
    case 'Provisioning':
      return 'Provisioning';
    case 'Deleting':
      return 'Deleting';
    case 'Failed':
    case 'Provisioned':
    case 'Initializing':
    case 'Joining':
    case 'Learner':
    case 'Voter':
      return 'Provisioned';
  }
}

/**
 * One observed machine. Defaults follow the phase: member phases run their member (started a minute
 * before NOW) and record a member ID; Provisioned machines run nothing; Pending has no infra yet.
 */
export function machine(name: string, opts: MachineOptions = {}): ObservedMachine {
  const base = spec();
  const phase = opts.phase ?? 'Provisioned';
  const ordinal = opts.ordinal ?? ordinalOf(name);
  const createdAt = opts.createdAt ?? NOW - 600_000 + ordinal * 1000;
  const isMemberPhase = MEMBER_PHASES.includes(phase);
  const infraState = opts.infra ?? defaultInfraState(phase);
  const phaseTimes: MachineRecord['phaseTimes'] = { Pending: createdAt, Provisioning: createdAt };
  if (infraState === 'Provisioned' || isMemberPhase) phaseTimes.Provisioned = opts.provisionedAt ?? createdAt + 30_000;
  if (isMemberPhase) phaseTimes[phase] = createdAt + 40_000;
  const record: MachineRecord = {
    cluster: 't',
    name,
    ordinal,
    version: opts.version ?? base.version,
    templateHash: opts.templateHash ?? base.templateHash,
    createdAt,
    phase,
    phaseTimes,
  };
  if (opts.failureDomain !== undefined) record.failureDomain = opts.failureDomain;
  if (opts.maxLearners !== undefined) record.maxLearners = opts.maxLearners;
  // The reconciler records the addresses once the provider reports them; a machine that reached
  // Provisioned keeps them even after its infrastructure disappears.
  if ((infraState !== 'none' && infraState !== 'Provisioning') || isMemberPhase || phase === 'Provisioned' || phase === 'Deleting') {
    record.address = addressOf(name);
    record.clientURL = clientURLOf(name);
    record.peerURL = peerURLOf(name);
  }
  const memberId = opts.memberId === undefined ? (isMemberPhase ? memberIdOf(name) : undefined) : (opts.memberId ?? undefined);
  if (memberId !== undefined) record.memberId = memberId;
  if (opts.failed !== undefined && opts.failed !== false) {
    record.failed = opts.failed === true ? { reason: 'MemberUnhealthy', message: 'test', at: NOW - 1000 } : opts.failed;
  }
  if (opts.deleteRequested !== undefined && opts.deleteRequested !== false) {
    record.deleteRequested = opts.deleteRequested === true ? { reason: 'ScaleDown', at: NOW - 1000 } : opts.deleteRequested;
  }
  if (opts.unhealthySince !== undefined) record.unhealthySince = opts.unhealthySince;
  if (opts.learnerProgress !== undefined) record.learnerProgress = opts.learnerProgress;
  if (infraState === 'none') return { record };
  const memberRunning = opts.memberRunning ?? isMemberPhase;
  const infra: NonNullable<ObservedMachine['infra']> = {
    state: infraState,
    memberRunning,
    address: addressOf(name),
    clientURL: clientURLOf(name),
    peerURL: peerURLOf(name),
  };
  const startedAt = opts.memberStartedAt === undefined ? (memberRunning ? NOW - 60_000 : undefined) : (opts.memberStartedAt ?? undefined);
  if (startedAt !== undefined) infra.memberStartedAt = startedAt;
  if (opts.failureMessage !== undefined) infra.failureMessage = opts.failureMessage;
  if (opts.memberDataBytes !== undefined) infra.memberDataBytes = opts.memberDataBytes;
  return { record, infra };
}

// ---------------------------------------------------------------- members

export interface MemberOptions {
  /** Member ID the member believes leads; '0' for none. Default: the member of t-1. */
  leader?: string;
  raftIndex?: number;
  /** Default: raftIndex (fully applied). */
  raftAppliedIndex?: number;
  /** Errors the member reports in its status (e.g. 'etcdserver: no leader'). */
  errors?: string[];
  /** The status call failed with this message. */
  statusError?: string;
  /** Not started yet: no name, no client URLs, no status (an added-but-unstarted learner). */
  unstarted?: boolean;
  /** Override the peer URL (e.g. a member whose machine is gone). */
  peerURL?: string;
  id?: string;
  version?: string;
  /** The member's database size (default 20 KiB, an empty member's). */
  dbSize?: number;
}

function member(machineName: string, isLearner: boolean, opts: MemberOptions): ObservedMember {
  const id = opts.id ?? memberIdOf(machineName);
  const peerURL = opts.peerURL ?? peerURLOf(machineName);
  if (opts.unstarted === true) return { id, name: '', peerURLs: [peerURL], clientURLs: [], isLearner };
  const raftIndex = opts.raftIndex ?? RAFT_INDEX;
  const result: ObservedMember = { id, name: machineName, peerURLs: [peerURL], clientURLs: [clientURLOf(machineName)], isLearner };
  if (opts.statusError !== undefined) {
    result.status = { ok: false, error: opts.statusError };
    return result;
  }
  const status: EtcdMemberStatus = {
    memberId: id,
    leaderId: opts.leader ?? memberIdOf('t-1'),
    raftIndex,
    raftAppliedIndex: opts.raftAppliedIndex ?? raftIndex,
    raftTerm: 2,
    isLearner,
    version: opts.version ?? '3.4.23',
    dbSize: opts.dbSize ?? 20_480,
    errors: opts.errors ?? [],
  };
  result.status = { ok: true, status };
  return result;
}

export function voter(machineName: string, opts: MemberOptions = {}): ObservedMember {
  return member(machineName, false, opts);
}

export function learner(machineName: string, opts: MemberOptions = {}): ObservedMember {
  return member(machineName, true, opts);
}

// ---------------------------------------------------------------- snapshot

export interface ObservedOptions {
  machines?: ObservedMachine[];
  /** The member list; a string means it could not be read (the error). */
  members?: ObservedMember[] | string;
  nextOrdinal?: number;
  /** Default: the lowest-ordinal machine when there are members, else none. */
  initMachine?: string | undefined;
  lastRemediation?: Observed['lastRemediation'];
  alarms?: EtcdAlarm[];
  lastMembershipAttempt?: Observed['lastMembershipAttempt'];
}

export function observed(opts: ObservedOptions = {}): Observed {
  const machines = opts.machines ?? [];
  const members = opts.members ?? [];
  const ordinals = machines.map((m) => m.record.ordinal);
  const result: Observed = {
    nextOrdinal: opts.nextOrdinal ?? Math.max(0, ...ordinals) + 1,
    machines,
    members: typeof members === 'string' ? { ok: false, error: members } : { ok: true, list: members },
    alarms: opts.alarms ?? [],
  };
  const hasMembers = typeof members === 'string' || members.length > 0;
  const firstMachine = [...machines].sort((a, b) => a.record.ordinal - b.record.ordinal)[0];
  const initMachine = 'initMachine' in opts ? opts.initMachine : hasMembers ? firstMachine?.record.name : undefined;
  if (initMachine !== undefined) result.initMachine = initMachine;
  if (opts.lastRemediation) result.lastRemediation = opts.lastRemediation;
  if (opts.lastMembershipAttempt) result.lastMembershipAttempt = opts.lastMembershipAttempt;
  return result;
}

// ---------------------------------------------------------------- clusters

export interface ClusterOptions {
  /** Ordinal of the first machine. Default 1. */
  from?: number;
  /** Leader machine name. Default: the first. */
  leader?: string;
  version?: string;
  /** The --max-learners every member was started with. */
  maxLearners?: number;
  templateHash?: string;
  /** Assigned round robin. */
  failureDomains?: string[];
}

/** N healthy voters on N Voter machines (t-1..t-N), all agreeing on one leader. */
export function healthyCluster(n: number, opts: ClusterOptions = {}): { machines: ObservedMachine[]; members: ObservedMember[] } {
  const from = opts.from ?? 1;
  const names = Array.from({ length: n }, (_, i) => `t-${String(from + i)}`);
  const leader = memberIdOf(opts.leader ?? names[0] ?? 't-1');
  const machines = names.map((name, i) => {
    const o: MachineOptions = { phase: 'Voter' };
    if (opts.version !== undefined) o.version = opts.version;
    if (opts.maxLearners !== undefined) o.maxLearners = opts.maxLearners;
    if (opts.templateHash !== undefined) o.templateHash = opts.templateHash;
    const domain = opts.failureDomains?.[i % opts.failureDomains.length];
    if (domain !== undefined) o.failureDomain = domain;
    return machine(name, o);
  });
  const members = names.map((name) => voter(name, { leader, ...(opts.version !== undefined ? { version: opts.version } : {}) }));
  return { machines, members };
}

/** A whole snapshot of a healthy N-voter cluster. */
export function healthyObserved(n: number, opts: ClusterOptions = {}): Observed {
  return observed(healthyCluster(n, opts));
}

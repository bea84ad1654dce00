import type { MachinePhase, MachineRecord } from '../domain/machine.ts';
import type { EtcdAlarm, EtcdErrorKind, EtcdMember, EtcdMemberStatus } from '../ports/etcd-admin.ts';
import type { ObservedCare } from '../ports/care.ts';
import type { InfraState, KubernetesComponent } from '../ports/machine-provider.ts';

/** The spec as the planner needs it: durations in milliseconds, no strings to parse. */
export interface PlannerSpec {
  name: string;
  replicas: number;
  version: string;
  templateHash: string;
  failureDomains: string[];
  strategy: 'parallel' | 'serial';
  maxConcurrentProvisioning: number;
  maxLearners: number;
  /**
   * `maxLearners: auto`: catch-ups also start only as far as the leader's measured uplink feeds them
   * without slowing the first (catch-up-budget.ts); a number is followed as set.
   */
  paceCatchUps: boolean;
  /** `fastplane`: etcd's own add/remove checks are off, and the planner makes them (guard.ts). */
  reconfigurationCheck: 'etcd' | 'fastplane';
  maxSurge: number;
  /** A Kubernetes control plane stacked on the members (spec.kubernetes); absent: etcd only. */
  kubernetes?: { version: string };
  /** Scheduled backups (spec.backup); none: only `fastplane backup` takes them. */
  backup?: { everyMs: number; keep: number };
  /** Routine maintenance (spec.maintenance); none: only `fastplane maintain` and NOSPACE recovery run it. */
  maintenance?: { everyMs: number; retainRevisions: number; fragmentationThreshold: number };
  remediation: {
    maxRetry: number;
    retryPeriodMs: number;
    minHealthyPeriodMs: number;
    unhealthyAfterMs: number;
    learnerStuckAfterMs: number;
  };
}

/** One machine as observed: its record plus what the provider says now (undefined: gone). */
export interface ObservedMachine {
  record: MachineRecord;
  infra?: {
    state: InfraState;
    failureMessage?: string;
    memberRunning: boolean;
    memberStartedAt?: number;
    /** Bytes in the running member's data dir (MachineInfra): a learner's progress before it answers. */
    memberDataBytes?: number;
    /** The provider's hint while Provisioning: the planner looks again then instead of polling. */
    expectedReadyAt?: number;
    address: string;
    clientURL: string;
    peerURL: string;
    /** Its Kubernetes components as their health checks answered (a Kubernetes control plane only). */
    components?: Partial<Record<KubernetesComponent, ObservedComponent>>;
  };
}

/** A Kubernetes component as observed: whether its process runs, and whether its health check said healthy. */
export interface ObservedComponent {
  running: boolean;
  healthy: boolean;
  reason?: string;
}

/** The control-plane endpoint as observed: the machines it routes to and which pass its health check; undefined routes: not running. */
export interface ObservedEndpoint {
  address: string;
  routes?: { machine: string; up: boolean }[];
}

/** A status call that did not answer is data, not an exception. */
export type StatusReading = { ok: true; status: EtcdMemberStatus } | { ok: false; error: string };

export interface ObservedMember extends EtcdMember {
  status?: StatusReading;
}

/** The last membership change attempted, so refusals (5 s rule, not in sync) become waits with reasons. */
export interface LastMembershipAttempt {
  action: MembershipAction['kind'];
  target: string;
  at: number;
  errorKind?: EtcdErrorKind;
  error?: string;
}

/** Day-2 facts (backups, certificates): the care port's, named here for the planner. */
export type { ObservedCare };

/**
 * The members' statuses at one earlier pass, kept by the observer: a guarded removal needs to see
 * voters keep up with the leader across at least one election timeout, which one reading cannot show.
 */
export interface VoterReading {
  at: number;
  statuses: Record<string, { leaderId: string; raftTerm: number; raftIndex: number }>;
}

export interface Observed {
  /** Next machine ordinal (names are `<cluster>-<ordinal>`). */
  nextOrdinal: number;
  /** Machine chosen for init, once chosen (never again in this cluster's life). */
  initMachine?: string;
  /** When a voter was first seen: from then on the init is never abandoned. */
  initializedAt?: number;
  /** When the cluster was last remediated, with the retry count (KCP semantics). */
  lastRemediation?: { machine: string; at: number; retryCount: number };
  machines: ObservedMachine[];
  /** The member list (linearizable when possible), or why it could not be read. */
  members: { ok: true; list: ObservedMember[] } | { ok: false; error: string };
  alarms: EtcdAlarm[];
  lastMembershipAttempt?: LastMembershipAttempt;
  care?: ObservedCare;
  /** Earlier readings of this run, oldest first (the observer's; empty on a first pass). */
  earlierReadings?: VoterReading[];
  /** A Kubernetes control plane's endpoint. */
  endpoint?: ObservedEndpoint;
}

export interface CreateMachine {
  kind: 'CreateMachine';
  machine: string;
  ordinal: number;
  /** The etcd version the machine runs: the spec's, or a hop on the upgrade path to it. */
  version: string;
  failureDomain?: string;
  reason: string;
}
export interface DeleteMachine {
  kind: 'DeleteMachine';
  machine: string;
  reason: string;
}
export interface MarkMachineFailed {
  kind: 'MarkMachineFailed';
  machine: string;
  reason: string;
  message: string;
}
export interface RequestMachineDeletion {
  kind: 'RequestMachineDeletion';
  machine: string;
  reason: string;
}
/**
 * Starts a stopped member again from its data dir, as itself. It changes no membership, so several
 * run at once; etcd ignores the bootstrap flags on a data dir.
 */
export interface RestartMember {
  kind: 'RestartMember';
  machine: string;
  reason: string;
}
/**
 * Clears the init machine (only while it names `machine`) so another machine may initialize: planned
 * only once that machine, whose member never started, is deleted. A record write, no etcd call.
 */
export interface AbandonInit {
  kind: 'AbandonInit';
  machine: string;
  reason: string;
}
/** Starts one Kubernetes component of a machine (it runs already: nothing to do). */
export interface StartComponent {
  kind: 'StartComponent';
  machine: string;
  component: KubernetesComponent;
  reason: string;
}
/** Stops every Kubernetes component of a machine, scheduler first, apiserver last. */
export interface StopComponents {
  kind: 'StopComponents';
  machine: string;
  reason: string;
}
/** The endpoint routes to exactly these machines' apiservers from now on. */
export interface RouteEndpoint {
  kind: 'RouteEndpoint';
  machines: string[];
  reason: string;
}
export type ComponentAction = StartComponent | StopComponents | RouteEndpoint;
export type MachineAction = CreateMachine | DeleteMachine | MarkMachineFailed | RequestMachineDeletion | RestartMember | AbandonInit | ComponentAction;

export interface InitCluster {
  kind: 'InitCluster';
  machine: string;
  reason: string;
}
/** Adds the machine's member as a learner, then starts it with a fresh --initial-cluster. */
export interface AddLearner {
  kind: 'AddLearner';
  machine: string;
  reason: string;
}
/** Starts a member that etcd already knows (learner added before a crash, or a restart). */
export interface StartMember {
  kind: 'StartMember';
  machine: string;
  memberId?: string;
  initialClusterState: 'new' | 'existing';
  reason: string;
}
export interface PromoteLearner {
  kind: 'PromoteLearner';
  machine: string;
  memberId: string;
  reason: string;
}
export interface MoveLeader {
  kind: 'MoveLeader';
  fromMemberId: string;
  toMemberId: string;
  machine: string;
  reason: string;
}
export interface RemoveMember {
  kind: 'RemoveMember';
  memberId: string;
  /** The machine this member belongs to, if it has one. */
  machine?: string;
  peerURL: string;
  reason: string;
}
export type MembershipAction = InitCluster | AddLearner | StartMember | PromoteLearner | MoveLeader | RemoveMember;

/** A snapshot into the backups folder (spec.backup), then the oldest beyond `keep` pruned. */
export interface TakeBackup {
  kind: 'TakeBackup';
  keep: number;
  reason: string;
}
/** New member and client certificates from the cluster's CA, members restarted one at a time behind the health gate. */
export interface RenewCertificates {
  kind: 'RenewCertificates';
  reason: string;
}
/** Scheduled maintenance: compact to the retained window, defragment fragmented members one at a time, leader last. */
export interface RunMaintenance {
  kind: 'RunMaintenance';
  retainRevisions: number;
  fragmentationThreshold: number;
  reason: string;
}
/** A NOSPACE alarm: compact all history, defragment every member (leader last), disarm. */
export interface RecoverNoSpace {
  kind: 'RecoverNoSpace';
  reason: string;
}
/**
 * etcd's downgrade protocol to `version`'s minor: validate, enable, every member restarted in place on
 * `version` one at a time (leader last), then the cluster version read back; cancelled if it fails midway.
 */
export interface DowngradeCluster {
  kind: 'DowngradeCluster';
  version: string;
  reason: string;
}
/**
 * Day-2 care the planner asks for from what it observed. It changes no membership and takes no
 * machine; the executor runs it beside the other actions of the decision.
 */
/** The cluster version pinned below every member's minor with no downgrade wanted: etcd's `downgrade cancel`. */
export interface CancelDowngrade {
  kind: 'CancelDowngrade';
  reason: string;
}
export type CareAction = TakeBackup | RenewCertificates | RecoverNoSpace | RunMaintenance | DowngradeCluster | CancelDowngrade;

export type Action = MachineAction | MembershipAction | CareAction;

export type ConditionType =
  | 'Available'
  | 'EtcdClusterHealthy'
  | 'MachinesReady'
  | 'UpToDate'
  | 'ScalingUp'
  | 'ScalingDown'
  | 'RollingOut'
  | 'Remediating'
  | 'BackupFailing'
  | 'CertificatesExpiringSoon'
  | 'ClusterVersionPinned'
  | 'ControlPlaneComponentsHealthy';

export interface Condition {
  type: ConditionType;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

/** Why the planner is not doing more right now; `code` is PascalCase, `message` reads as a sentence. */
export interface Wait {
  code: string;
  message: string;
  machine?: string;
}

export interface Decision {
  machineActions: MachineAction[];
  membershipAction?: MembershipAction;
  /** Backups, certificate renewal, NOSPACE recovery: none when nothing is due. */
  careActions?: CareAction[];
  waits: Wait[];
  conditions: Condition[];
  /** When to look again, in ms. */
  requeueAfterMs: number;
  /** voters == replicas, no learners, every member healthy and up to date, nothing pending. */
  converged: boolean;
  /** A safety gate refuses progress that waiting alone will not fix (e.g. quorum lost). */
  blocked?: Wait;
  /** Phase of each machine as this decision sees it (the reconciler records transitions). */
  phases: Record<string, MachinePhase>;
}

import type { ControlPlane } from '../api/control-plane.ts';
import type { CareJobRecord } from './care-job.ts';

/** Where a machine is in its life; each record keeps when it entered each phase (the timeline). */
export type MachinePhase =
  | 'Pending'
  | 'Provisioning'
  | 'Provisioned'
  | 'Initializing'
  | 'Joining'
  | 'Learner'
  | 'Voter'
  | 'Deleting'
  | 'Failed';

export type MachineRole = 'init' | 'join';

/** A snapshot file to initialise a cluster from, with the SHA-256 it was checked against. */
export interface SnapshotSource {
  file: string;
  sha256: string;
}

/** What a learner has shown of its catch-up: its applied index once it answers, its data dir's bytes before. */
export interface LearnerProgress {
  appliedIndex?: number;
  dataBytes?: number;
  /** When either last grew. */
  at: number;
  /** How fast its data dir grows while its snapshot arrives (src/planner/learner-progress.ts). */
  receive?: LearnerReceive;
}

/**
 * A learner's receive rate, from its data dir's growth over windows of at least a second: the rate of
 * the last window and the highest any window reached. The sum over the learners still receiving is
 * what the leader sends them.
 */
export interface LearnerReceive {
  /** The reading the open window started from. */
  from: { bytes: number; at: number };
  /** When its data dir first grew past the baseline (its first reading once started): its snapshot began to arrive. */
  since?: number;
  /** Bytes per second over the last closed window, and when that window started. */
  latest?: { bytesPerSecond: number; from: number };
  /** The highest bytes per second any closed window reached. */
  peak?: number;
}

export interface MachineRecord {
  cluster: string;
  name: string;
  ordinal: number;
  /** The etcd version this machine runs. */
  version: string;
  /** The Kubernetes version its components run (a Kubernetes control plane only); fixed at creation. */
  kubernetesVersion?: string;
  /** Hash of the spec fields that require a new machine when they change (rollout). */
  templateHash: string;
  failureDomain?: string;
  createdAt: number;
  phase: MachinePhase;
  phaseTimes: Partial<Record<MachinePhase, number>>;
  role?: MachineRole;
  /** When this machine was recorded as the init machine: how long its member has had to start. */
  initRecordedAt?: number;
  memberId?: string;
  address?: string;
  clientURL?: string;
  peerURL?: string;
  /** Sticky: set once the machine is judged broken; it is then removed and replaced. */
  failed?: { reason: string; message: string; at: number };
  /** Set when the planner picked this machine to go (scale down, rollout, remediation). */
  deleteRequested?: { reason: string; at: number };
  /** When its member was first seen unhealthy in the current streak. */
  unhealthySince?: number;
  /** A Kubernetes machine: set once its kube-apiserver has answered ready; unhealthiness counts only after. */
  apiserverReadyAt?: number;
  /** When its kube-apiserver, ready before, was first seen not ready in the current streak. */
  apiserverUnhealthySince?: number;
  /**
   * Last time a learner showed progress (its applied index moved, or its data dir grew while a snapshot
   * arrives), with what it showed: a stuck learner is told from a slow one by this.
   */
  learnerProgress?: LearnerProgress;
  /**
   * How its member was last started: false with `--strict-reconfig-check=false` (etcd's own add and
   * removal checks off). Recorded before each start; absent on machines started before it was kept.
   */
  strictReconfigCheck?: boolean;
  /** The --max-learners its member was last started with; absent on machines started before it was kept. */
  maxLearners?: number;
}

export interface RemediationRecord {
  machine: string;
  at: number;
  retryCount: number;
}

export interface ControlPlaneRecord {
  name: string;
  manifest: ControlPlane;
  /** Incremented by every apply that changes the spec; commands wait for their own generation. */
  generation: number;
  createdAt: number;
  /** etcd --initial-cluster-token for this cluster. */
  clusterToken: string;
  /** One above the highest machine ordinal ever used: the store never lowers it. */
  nextOrdinal: number;
  /** Set before the init member starts: a cluster is initialised at most once in its life. */
  initMachine?: string;
  /**
   * Init machines whose member never started and that were deleted before another init was chosen
   * (at most one cluster ever bootstraps: an abandoned data dir never starts). Never named again.
   */
  abandonedInits?: string[];
  /** The highest raft index any reconcile pass observed: what `recover` compares a survivor against. */
  highestRaftIndex?: number;
  /** `fastplane restore`: the init member starts from this snapshot instead of an empty data dir. */
  restoreFrom?: SnapshotSource;
  initializedAt?: number;
  lastRemediation?: RemediationRecord;
  /** Last reported conditions, kept so lastTransitionTime only moves when a status changes. */
  conditions?: StoredCondition[];
  /** The generation the last reconcile pass acted on, and how that pass ended. */
  observedGeneration?: number;
  lastPass?: PassSummary;
  /** How the last scheduled backup ended (spec.backup): a failure is the BackupFailing condition until one succeeds. */
  lastBackupAttempt?: { at: number; ok: boolean; message: string };
  lastMaintenance?: { at: number; ok: boolean; message: string };
  /** The rolling care job in progress, or the last one (ended). */
  careJob?: CareJobRecord;
}

/** What the lease holder's latest pass found: what waiting commands show and judge. */
export interface PassSummary {
  generation: number;
  /** When a pass last wrote this summary: passes that find the same write nothing. */
  at: number;
  converged: boolean;
  blocked: boolean;
  /** The planner's waits, one line each, for progress shown by commands that wait. */
  waits: string[];
}

export interface StoredCondition {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  lastTransitionTime: number;
}

export type EventType = 'Normal' | 'Warning';

export interface EventRecord {
  cluster: string;
  at: number;
  type: EventType;
  reason: string;
  message: string;
  machine?: string;
  /** For membership changes and machine actions: the action kind and when it ended. */
  action?: string;
  endedAt?: number;
  /** Refused: etcd or a safety check said no (retried on a later pass); Failed: anything else. */
  outcome?: 'Succeeded' | 'Refused' | 'Failed';
  /** Position in the cluster's event log, set by the store on read. */
  seq?: number;
}

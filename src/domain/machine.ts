import type { ControlPlane } from '../api/control-plane.ts';

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

export interface MachineRecord {
  cluster: string;
  name: string;
  ordinal: number;
  /** The etcd version this machine runs. */
  version: string;
  /** Hash of the spec fields that require a new machine when they change (rollout). */
  templateHash: string;
  failureDomain?: string;
  createdAt: number;
  phase: MachinePhase;
  phaseTimes: Partial<Record<MachinePhase, number>>;
  role?: MachineRole;
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
  /** Last time a learner's applied index moved, to tell a stuck learner from a slow one. */
  learnerProgress?: { appliedIndex: number; at: number };
}

export interface RemediationRecord {
  machine: string;
  at: number;
  retryCount: number;
}

export interface ControlPlaneRecord {
  name: string;
  manifest: ControlPlane;
  createdAt: number;
  /** etcd --initial-cluster-token for this cluster. */
  clusterToken: string;
  /** Next machine ordinal; never reused, so peer URLs are never reused. */
  nextOrdinal: number;
  /** Set before the init member starts: a cluster is initialised at most once in its life. */
  initMachine?: string;
  initializedAt?: number;
  lastRemediation?: RemediationRecord;
  /** Last reported conditions, kept so lastTransitionTime only moves when a status changes. */
  conditions?: StoredCondition[];
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
  outcome?: 'Succeeded' | 'Failed';
}

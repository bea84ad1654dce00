import type { CareJobRecord } from '../domain/care-job.ts';
import type { Fence } from './machine-provider.ts';
import type { StoreWrite } from './state-store.ts';

/**
 * Day-2 facts besides etcd and the machines: the backups folder, the certificates on disk. Absent
 * where nobody observes them (the simulator), and then nothing is planned from them.
 */
export interface ObservedCare {
  backups?: {
    /** When the newest complete backup was taken. */
    latestAt?: number;
    count: number;
    /** How the last scheduled backup ended. */
    lastAttempt?: { at: number; ok: boolean; message: string };
  };
  /** The certificate that expires first, of the cluster's CA, client and members. */
  certificates?: { earliestExpiry: number; file: string };
  /** How the last scheduled maintenance ended. */
  lastMaintenance?: { at: number; ok: boolean; message: string };
  /** The rolling care job in progress: the loop carries it on before it starts another. */
  job?: CareJobRecord;
  /**
   * The version the cluster runs at (major.minor.0), as the first member that answers reports it on
   * `/version`: below every member's own minor while etcd's downgrade is enabled.
   */
  clusterVersion?: string;
}

/**
 * The cluster's lease as day-2 work needs it: checked before each step that changes the cluster, so a
 * process that lost the lease stops before its next step. The lease's fenced writer is one.
 */
export interface LeaseGuard {
  /** Throws when this process no longer holds the cluster's lease. */
  verify(): Promise<void>;
  /** The lease's fencing number, carried by every restart's stop and start. */
  readonly fence?: Fence;
}

/** A change of the cluster version by etcd's downgrade protocol: one minor down to `version`, or a downgrade left enabled ended. */
export type DowngradeWork = { kind: 'downgrade'; version: string } | { kind: 'cancel' };

/** The lease's writer (the FencedWriter): a restart records how its member starts, fenced by the lease. */
export interface LeaseWriter extends LeaseGuard {
  commit(...writes: StoreWrite[]): Promise<void>;
}

/** What `certs` shows of one certificate file. */
export interface CertificateInfo {
  file: string;
  subject: string;
  issuer: string;
  notBefore: string;
  notAfter: string;
}

/**
 * The host's tools for snapshot files: etcd's offline snapshot tools of a version, and the file helpers
 * a backup is written with.
 */
/** What `snapshot status` says of a snapshot file. */
export interface SnapshotStatus {
  revision: number;
  totalKey: number;
}

export interface SnapshotTools {
  /** Opens a snapshot file with the tools of that etcd version (`snapshot status`): its revision and key count. */
  status(version: string, file: string): Promise<SnapshotStatus>;
  sha256(file: string): Promise<string>;
  /** Writes a file whole or not at all (a temporary file, then a rename). */
  writeAtomic(path: string, data: string, mode: number): Promise<void>;
}

/** What `maintain` does to the cluster: compaction to a retained window, defragmentation above a threshold. */
export interface MaintainOptions {
  /** Revisions of history kept by compaction (a NOSPACE alarm compacts all of it). */
  retainRevisions: number;
  /** Defragment a member when this share of its backend file is free pages (0..1). */
  fragmentationThreshold: number;
}

/**
 * Day-2 care of one control plane, as the reconcile loop needs it: what the backups folder and the
 * certificates on disk show (reads only: `status` observes too), and the work the planner's care
 * actions ask for. Each operation is idempotent: run twice, it leaves what one run leaves.
 */
export interface CarePort {
  observe(): Promise<ObservedCare>;
  /** Takes one verified backup and prunes the oldest beyond `keep`; returns a line describing it. */
  takeBackup(keep: number): Promise<string>;
  /**
   * Carries a rolling job on (certificate renewal: members restarted one at a time behind the health
   * gate, each start recorded through `writer`; maintenance: compaction, then fragmented members
   * defragmented leader last; NOSPACE recovery: all history compacted, every member defragmented, the
   * alarm disarmed): its steps until one waits or the job ends. Returns the job's record as it now stands.
   */
  advanceJob(writer: LeaseWriter, job: CareJobRecord): Promise<CareJobRecord>;
  /**
   * etcd's downgrade protocol, run to its end within the call: `downgrade` takes the cluster one minor
   * down, each member restarted in place on `version` and each machine's new version recorded through
   * `writer` (before its member starts on it); `cancel` ends a downgrade left enabled (the cluster
   * version pinned below every member's minor) with etcd's `downgrade cancel`, after giving a version
   * that only lags a rollout its time to rise. Returns what it did.
   */
  downgrade(writer: LeaseWriter, work: DowngradeWork): Promise<string[]>;
}

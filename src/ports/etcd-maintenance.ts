import type { Writable } from 'node:stream';
import type { EtcdAlarm } from './etcd-admin.ts';

/**
 * What day-2 care needs from etcd's Maintenance and KV APIs: snapshots, compaction, defragmentation and
 * alarms. Apart from EtcdAdmin because the reconcile loop never calls these (the etcd model does not
 * implement them); backups, restores and `maintain` do.
 */
export interface MemberUsage {
  clusterId: string;
  memberId: string;
  /** The key-value store's current revision. */
  revision: number;
  raftIndex: number;
  leaderId: string;
  isLearner: boolean;
  version: string;
  /** Bytes the backend file takes, and bytes its live pages use: the difference is what defragmenting frees. */
  dbSize: number;
  dbSizeInUse: number;
}

export interface EtcdMaintenance {
  /** Revision, sizes and identity of the member behind this one endpoint. */
  usage(endpoint: string): Promise<MemberUsage>;
  /**
   * Streams a snapshot of the member's backend into `sink` (with backpressure) and ends it; rejects,
   * leaving the sink unended, when the stream fails.
   */
  snapshot(endpoint: string, sink: Writable): Promise<void>;
  /** How many keys the store held at `revision`, asked of the member behind this one endpoint. */
  countKeys(endpoint: string, revision: number): Promise<number>;
  /** Compacts the key-value history up to `revision`; a revision compacted already counts as done. */
  compact(endpoints: readonly string[], revision: number): Promise<void>;
  /** Defragments the backend of the member behind this one endpoint (it blocks that member meanwhile). */
  defragment(endpoint: string): Promise<void>;
  /** Clears one raised alarm. */
  disarm(endpoints: readonly string[], alarm: EtcdAlarm): Promise<void>;
  close(): Promise<void>;
}

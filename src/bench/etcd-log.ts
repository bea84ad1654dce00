import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { seconds } from './stats.ts';

/** A learner's snapshot catch-up as its etcd log tells it (3.4 with --logger zap, and 3.5, log the same messages). */
export interface LearnerSnapshot {
  /** Bytes of the database snapshot the leader sent: the backend file, larger than the keys written. */
  bytes: number;
  /** "receiving database snapshot" to "received and saved database snapshot": the transfer, written to disk. */
  receiveSeconds: number;
  /** Saved to "applied snapshot": opening the received backend and rebuilding the key index. */
  applySeconds: number;
  /** Learner process started (AddLearner done) to snapshot applied: the data part of catch-up. */
  appliedAfterSeconds: number;
  /**
   * The first attempt to publish the member timed out (etcd's request timeout, 7 s by default). This
   * happens when the leader applied the learner's publish proposal before building the snapshot: the
   * entry then arrives inside the snapshot, never as an entry, so the wait for it never ends. The
   * learner serves clients only after the retry.
   */
  publishTimedOut: boolean;
}

const SNAPSHOT_RECEIVING = 'receiving database snapshot';
const SNAPSHOT_SAVED = 'received and saved database snapshot';
const SNAPSHOT_APPLIED = 'applied snapshot';
const PUBLISH_FAILED = 'failed to publish local member to cluster through raft';

/** The member's etcd log (the local provider keeps it at clusters/<cluster>/machines/<name>/etcd.log); null if absent. */
export function memberLog(stateDir: string, cluster: string, machine: string): string | null {
  try {
    return readFileSync(join(stateDir, 'clusters', cluster, 'machines', machine, 'etcd.log'), 'utf8');
  } catch {
    return null;
  }
}

/** Whether the log shows a database snapshot received and saved. */
export function logShowsSnapshot(log: string): boolean {
  return log.includes(SNAPSHOT_SAVED);
}

/**
 * The first snapshot a learner received, from its own zap log: proof that a preload made it catch up
 * from a snapshot rather than a log replay, and where its catch-up time went. `startedAt` is when its
 * process was started (epoch ms); null when the log shows no complete snapshot.
 */
export function learnerSnapshotFromLog(log: string, startedAt: number): LearnerSnapshot | null {
  const first = new Map<string, { at: number; line: Record<string, unknown> }>();
  for (const text of log.split('\n')) {
    if (!text.startsWith('{')) continue;
    let line: Record<string, unknown>;
    try {
      line = JSON.parse(text) as Record<string, unknown>;
    } catch {
      continue;
    }
    const { msg, ts } = line;
    if (typeof msg !== 'string' || typeof ts !== 'string' || first.has(msg)) continue;
    const at = Date.parse(ts);
    if (!Number.isNaN(at)) first.set(msg, { at, line });
  }
  const receiving = first.get(SNAPSHOT_RECEIVING);
  const saved = first.get(SNAPSHOT_SAVED);
  const applied = first.get(SNAPSHOT_APPLIED);
  if (!receiving || !saved || !applied) return null;
  const bytes = saved.line['incoming-snapshot-size-bytes'];
  return {
    bytes: typeof bytes === 'number' ? bytes : 0,
    receiveSeconds: seconds(saved.at - receiving.at),
    applySeconds: seconds(applied.at - saved.at),
    appliedAfterSeconds: seconds(applied.at - startedAt),
    publishTimedOut: first.has(PUBLISH_FAILED),
  };
}

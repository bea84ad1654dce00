import type { DurationRange } from '../api/duration.ts';

/**
 * Timings measured as docs/etcd-behaviour.md describes (etcd 3.4.23 / 3.5.16, loopback, empty database) unless the caller
 * overrides them: learner start to promotable 0.2-0.45 s, the 5 s peer-connection rule for adds and
 * voter removals, about 1.4 s for a new leader after the old one goes.
 */
export interface ModelTimings {
  provisioning: DurationRange;
  deletion: DurationRange;
  catchUp: DurationRange;
  peerHealthGateMs: number;
  electionMs: number;
  /**
   * A joining member reads the membership and names itself in the member list this long after it
   * starts, however long its catch-up takes (0.29-0.31 s on 3.4.23, 3.5.16 and 3.6.17 with a 220 MB
   * keyspace that took 2-7 s to catch up).
   */
  publishMs: number;
  /** Raft entries per second written by clients, so a stalled learner falls visibly behind. */
  writesPerSecond: number;
  /**
   * Round trip of one etcd or provider call (not measured; 0 keeps timelines exact). With a latency,
   * a change lands halfway through its call, so calls can overlap and observations can go stale.
   */
  callLatency: DurationRange;
}

export const MEASURED_TIMINGS: ModelTimings = {
  provisioning: { minMs: 0, maxMs: 0 },
  deletion: { minMs: 0, maxMs: 0 },
  catchUp: { minMs: 200, maxMs: 450 },
  peerHealthGateMs: 5000,
  electionMs: 1400,
  publishMs: 300,
  writesPerSecond: 20,
  callLatency: { minMs: 0, maxMs: 0 },
};


import type { EtcdAdmin, EtcdMember } from '../ports/etcd-admin.ts';
import { pollUntilStopped } from './polling.ts';

/**
 * Watches a cluster's joins from outside fastplane, with its own etcd client, every 20 ms: when each
 * learner first answered with an applied index within 10 of the leader's (caught up: promotable), and
 * when etcd first listed it as a voter. Promotion latency is the time between the two, so it measures
 * how fast fastplane reacts to a learner being ready, not the promote RPC.
 */

/** etcd's own "in sync" threshold is 90% of the leader's log; fastplane's promotion rule is 10 entries. */
const CAUGHT_UP_ENTRIES = 10;
const POLL_MS = 20;
/** Re-read the machines' addresses this often (new machines appear during a bring-up). */
const ENDPOINTS_EVERY_MS = 250;

export interface WatchedJoin {
  peerURL: string;
  /** Epoch ms: first listed as a learner. */
  learnerAt: number;
  /** First answered as a learner with an applied index within 10 of the leader's; null if never seen so. */
  caughtUpAt: number | null;
  /** Last reading of it as a learner not yet caught up (an upper bound on when it caught up if the watcher missed it). */
  lastBehindAt: number | null;
  /** First listed as a voter. */
  voterAt: number | null;
}

/** Caught up to listed as a voter, in ms; when the watcher never saw it caught up, from its last reading behind. */
export function promotionLatencyMs(join: WatchedJoin): number | null {
  const from = join.caughtUpAt ?? join.lastBehindAt;
  return join.voterAt === null || from === null ? null : Math.max(0, join.voterAt - from);
}

export class PromotionWatcher {
  private readonly joins = new Map<string, WatchedJoin>();
  private stopped = false;
  private loop: Promise<void> | undefined;
  private endpoints: string[] = [];
  private endpointsReadAt = 0;
  private leaderURL: string | undefined;

  constructor(
    private readonly admin: EtcdAdmin,
    /** Client URLs of the cluster's machines, as the provider records them. */
    private readonly readEndpoints: () => Promise<string[]>,
  ) {}

  start(): void {
    this.loop = this.run();
  }

  /** Stops watching; the joins seen, by peer URL. */
  async stop(): Promise<Map<string, WatchedJoin>> {
    this.stopped = true;
    await this.loop;
    return this.joins;
  }

  /** No member answers yet (machines still provisioning) or one is restarting: try the next tick. */
  private async run(): Promise<void> {
    await pollUntilStopped(POLL_MS, () => this.tick(), () => this.stopped);
  }

  private async tick(): Promise<void> {
    if (this.endpoints.length === 0 || Date.now() - this.endpointsReadAt >= ENDPOINTS_EVERY_MS) {
      this.endpoints = await this.readEndpoints();
      this.endpointsReadAt = Date.now();
    }
    if (this.endpoints.length === 0) return;
    // The leader first: it is the one whose list changes first.
    const ordered = this.leaderURL === undefined ? this.endpoints : [this.leaderURL, ...this.endpoints.filter((e) => e !== this.leaderURL)];
    const members = await this.admin.memberList(ordered, { linearizable: false });
    const listedAt = Date.now();
    for (const member of members) this.recordListing(member, listedAt);
    const learners = members.filter((m) => m.isLearner && m.clientURLs.length > 0 && this.joins.get(m.peerURLs[0] ?? '')?.caughtUpAt === null);
    if (learners.length === 0) return;
    const leaderApplied = await this.leaderApplied(members);
    await Promise.all(learners.map((learner) => this.readLearner(learner, leaderApplied)));
  }

  private recordListing(member: EtcdMember, at: number): void {
    const peerURL = member.peerURLs[0];
    if (peerURL === undefined) return;
    const join = this.joins.get(peerURL);
    if (member.isLearner && join === undefined) this.joins.set(peerURL, { peerURL, learnerAt: at, caughtUpAt: null, lastBehindAt: null, voterAt: null });
    if (!member.isLearner && join !== undefined && join.voterAt === null) join.voterAt = at;
  }

  private async leaderApplied(members: EtcdMember[]): Promise<number> {
    const voter = members.find((m) => !m.isLearner && m.clientURLs.length > 0);
    const probe = this.leaderURL ?? voter?.clientURLs[0];
    if (probe === undefined) throw new Error('no voter to ask');
    let status = await this.admin.status(probe);
    if (status.memberId !== status.leaderId) {
      const leader = members.find((m) => m.id === status.leaderId)?.clientURLs[0];
      if (leader === undefined) throw new Error('no leader');
      status = await this.admin.status(leader);
      this.leaderURL = leader;
    } else {
      this.leaderURL = probe;
    }
    return status.raftAppliedIndex;
  }

  private async readLearner(learner: EtcdMember, leaderApplied: number): Promise<void> {
    const join = this.joins.get(learner.peerURLs[0] ?? '');
    const url = learner.clientURLs[0];
    if (join === undefined || url === undefined) return;
    try {
      const status = await this.admin.status(url);
      const at = Date.now();
      if (status.raftAppliedIndex >= leaderApplied - CAUGHT_UP_ENTRIES) join.caughtUpAt ??= at;
      else join.lastBehindAt = at;
    } catch {
      // Not serving yet: still catching up.
      join.lastBehindAt = Date.now();
    }
  }
}

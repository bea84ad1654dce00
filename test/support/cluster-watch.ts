import type { Etcd3Admin } from '../../src/adapters/etcd3-admin.ts';
import { quorum } from '../../src/domain/quorum.ts';
import { adminFor, type ClusterAccess } from './etcd-direct.ts';

export interface ClusterSample {
  at: number;
  voters: number;
  learners: number;
  /** Voters that answer their own status with a leader and no errors. */
  healthyVoters: number;
  /** Peer URL of the leader all healthy voters agree on, if any. */
  leaderPeerURL?: string;
  versions: string[];
}

/**
 * Samples a cluster from outside, straight from etcd, every ~150 ms while a test changes it: who is
 * a member, who leads, how many voters answer. Assertions about "never" (quorum lost, the leader's
 * machine deleted) are checked against these samples, not against fastplane's own records.
 */
export class ClusterWatch {
  readonly samples: ClusterSample[] = [];
  private readonly admin: Etcd3Admin;
  private readonly endpoints = new Set<string>();
  private running = false;
  private loop: Promise<void> = Promise.resolve();

  /** Starts from the endpoints (and client credentials) of a status document. */
  constructor(access: ClusterAccess) {
    this.admin = adminFor(access, { callTimeoutMs: 800, statusTimeoutMs: 500 });
    for (const e of access.endpoints) this.endpoints.add(e);
  }

  start(): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        await this.sample();
        await new Promise((resolve) => setTimeout(resolve, 150));
      }
    })();
  }

  private async sample(): Promise<void> {
    const at = Date.now();
    let members;
    try {
      members = await this.admin.memberList([...this.endpoints]);
    } catch {
      // No member answers at all: the voters last seen are all down.
      this.samples.push({ at, voters: this.samples.at(-1)?.voters ?? 0, learners: 0, healthyVoters: 0, versions: [] });
      return;
    }
    for (const m of members) for (const url of m.clientURLs) this.endpoints.add(url);
    const voters = members.filter((m) => !m.isLearner);
    let polled = await Promise.all(
      voters.map(async (member) => {
        const url = member.clientURLs[0];
        const status = url === undefined ? undefined : await this.admin.status(url).catch(() => undefined);
        return { member, status: status !== undefined && status.leaderId !== '0' && status.errors.length === 0 ? status : undefined };
      }),
    );
    const leaderId = polled.find((p) => p.status !== undefined)?.status?.leaderId;
    const leader = members.find((m) => m.id === leaderId);
    // A removed member exits as soon as it applies its own removal, which can fall between the list
    // read (from a member that had not applied it yet) and its status: ask the leader, after the
    // statuses, which of the silent voters it still has.
    const leaderURL = leader?.clientURLs[0];
    if (leaderURL !== undefined && polled.some((p) => p.status === undefined)) {
      const current = await this.admin.memberList([leaderURL]).catch(() => undefined);
      if (current !== undefined) {
        const stillVoters = new Set(current.filter((m) => !m.isLearner).map((m) => m.id));
        polled = polled.filter((p) => p.status !== undefined || stillVoters.has(p.member.id));
      }
    }
    const healthy = polled.flatMap((p) => (p.status === undefined ? [] : [p.status]));
    const sample: ClusterSample = {
      at,
      voters: polled.length,
      learners: members.length - voters.length,
      healthyVoters: healthy.length,
      versions: healthy.map((s) => s.version),
    };
    if (leader?.peerURLs[0] !== undefined) sample.leaderPeerURL = leader.peerURLs[0];
    this.samples.push(sample);
  }

  /** Resolves at the first sample, from now on, that matches (15 s at most). */
  async until(match: (sample: ClusterSample) => boolean, timeoutMs = 15_000): Promise<ClusterSample> {
    const from = this.samples.length;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.samples.slice(from).find(match);
      if (found !== undefined) return found;
      if (Date.now() > deadline) throw new Error('timed out waiting for a matching cluster sample');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await this.admin.close();
  }

  /** Samples in which the healthy voters were fewer than the quorum of the voters. */
  quorumLosses(): ClusterSample[] {
    return this.samples.filter((s) => s.voters > 0 && s.healthyVoters < quorum(s.voters));
  }

  leaderAt(time: number): string | undefined {
    let leader: string | undefined;
    for (const s of this.samples) if (s.at <= time && s.leaderPeerURL !== undefined) leader = s.leaderPeerURL;
    return leader;
  }
}

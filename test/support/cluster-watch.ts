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
      this.samples.push({ at, voters: 0, learners: 0, healthyVoters: 0, versions: [] });
      return;
    }
    for (const m of members) for (const url of m.clientURLs) this.endpoints.add(url);
    const voters = members.filter((m) => !m.isLearner);
    const statuses = await Promise.all(
      voters.map(async (m) => {
        const url = m.clientURLs[0];
        if (url === undefined) return undefined;
        try {
          return await this.admin.status(url);
        } catch {
          return undefined;
        }
      }),
    );
    const healthy = statuses.filter((s) => s !== undefined && s.leaderId !== '0' && s.errors.length === 0);
    const leaderId = healthy[0]?.leaderId;
    const leader = members.find((m) => m.id === leaderId);
    const sample: ClusterSample = {
      at,
      voters: voters.length,
      learners: members.length - voters.length,
      healthyVoters: healthy.length,
      versions: healthy.map((s) => s!.version),
    };
    if (leader?.peerURLs[0] !== undefined) sample.leaderPeerURL = leader.peerURLs[0];
    this.samples.push(sample);
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

import type { Etcd3Admin } from '../../src/adapters/etcd/etcd3-admin.ts';
import { quorum } from '../../src/domain/quorum.ts';
import { adminFor, type ClusterAccess } from './etcd-direct.ts';

export interface ClusterSample {
  at: number;
  voters: number;
  learners: number;
  /** Voters that answer their own status without errors. */
  answeringVoters: number;
  /** Peer URL of the leader an answering voter names, if any names one. */
  leaderPeerURL?: string;
  versions: string[];
  /** Why each voter that does not answer was counted so: what a failed "quorum held" shows. */
  silent?: string[];
}

/**
 * Longer than any election should take with etcd's default 1 s election timeout. During a leader
 * transfer (MoveLeader) every voter that has seen the new term names no leader until the new leader's
 * first append, so one sample may find the whole cluster leaderless while quorum is intact.
 */
const MAX_ELECTION_MS = 3_000;

/**
 * Samples in which fewer than a quorum of the voters answered, and the samples of a stretch with no
 * leader named that lasted longer than an election takes.
 */
export function quorumLosses(samples: readonly ClusterSample[]): ClusterSample[] {
  const losses = new Set(samples.filter((s) => s.voters > 0 && s.answeringVoters < quorum(s.voters)));
  let leaderless: ClusterSample[] = [];
  for (const s of [...samples, undefined]) {
    if (s !== undefined && s.leaderPeerURL === undefined) {
      leaderless.push(s);
      continue;
    }
    const first = leaderless[0];
    const end = s ?? leaderless.at(-1);
    if (first !== undefined && end !== undefined && end.at - first.at > MAX_ELECTION_MS) for (const l of leaderless) losses.add(l);
    leaderless = [];
  }
  return samples.filter((s) => losses.has(s));
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
      this.samples.push({ at, voters: this.samples.at(-1)?.voters ?? 0, learners: 0, answeringVoters: 0, versions: [], silent: ['no member answers a member list'] });
      return;
    }
    for (const m of members) for (const url of m.clientURLs) this.endpoints.add(url);
    const voters = members.filter((m) => !m.isLearner);
    let polled = await Promise.all(
      voters.map(async (member) => {
        const url = member.clientURLs[0];
        if (url === undefined) return { member, status: undefined, why: 'no client URL' };
        const status = await this.admin.status(url).catch((error: unknown) => (error instanceof Error ? error.message : String(error)));
        if (typeof status === 'string') return { member, status: undefined, why: `no answer: ${status}` };
        if (status.errors.length > 0) return { member, status: undefined, why: `errors: ${status.errors.join('; ')}` };
        return { member, status, why: undefined };
      }),
    );
    const leaderId = polled.flatMap((p) => (p.status === undefined || p.status.leaderId === '0' ? [] : [p.status.leaderId]))[0];
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
    const answering = polled.flatMap((p) => (p.status === undefined ? [] : [p.status]));
    const sample: ClusterSample = {
      at,
      voters: polled.length,
      learners: members.length - voters.length,
      answeringVoters: answering.length,
      versions: answering.map((s) => s.version),
    };
    if (leader?.peerURLs[0] !== undefined) sample.leaderPeerURL = leader.peerURLs[0];
    const silent = polled.flatMap((p) => (p.why === undefined ? [] : [`${p.member.peerURLs[0] ?? p.member.id}: ${p.why}`]));
    if (silent.length > 0) sample.silent = silent;
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

  /** See {@link quorumLosses}. */
  quorumLosses(): ClusterSample[] {
    return quorumLosses(this.samples);
  }

  leaderAt(time: number): string | undefined {
    let leader: string | undefined;
    for (const s of this.samples) if (s.at <= time && s.leaderPeerURL !== undefined) leader = s.leaderPeerURL;
    return leader;
  }
}

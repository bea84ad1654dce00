import { readdirSync, readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Etcd3 } from 'etcd3';
import type { Etcd3Admin } from '../../src/adapters/etcd/etcd3-admin.ts';
import type { EtcdMember } from '../../src/ports/etcd-admin.ts';
import type { EventEntry } from '../../src/cli/commands/events.ts';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { MEMBERSHIP_ACTIONS, type CliRun } from './cli.ts';
import { adminFor, kvClientFor, type ClusterAccess } from './etcd-direct.ts';

/** The four factors of the combination matrix and their values. */
export const FACTORS = {
  provider: ['local', 'ssh'],
  store: ['sqlite', 'etcd'],
  check: ['etcd', 'fastplane'],
  driver: ['cli', 'controller'],
} as const;

export type Factor = keyof typeof FACTORS;
export type Combination = { [F in Factor]: (typeof FACTORS)[F][number] };

/** What a row's scenario works with; the row stops what `watch` started and downs the cluster whatever happens. */
export interface RowRun {
  name: string;
  /** The row's manifest, written for its scenario. */
  manifest: string;
  /** The `--timeout` of each step. */
  stepTimeout: string;
  cli: (args: string[]) => Promise<CliRun>;
  /** Runs the CLI and asserts it exited 0 (with the controller driver: that the controller did the work). */
  ok: (what: string, args: string[]) => Promise<CliRun>;
  /** Runs `work` as a timed step of the row's line in the table. */
  step: <T>(what: string, work: () => Promise<T>) => Promise<T>;
  /** Starts the member probe and the key writer (on `endpoints` until the probe has seen voters). */
  watch: (doc: ControlPlaneStatusDocument, endpoints: () => string[]) => Promise<{ probe: MemberProbe; writer: KeyWriter }>;
  events: () => Promise<EventEntry[]>;
}

/** Every pair of values of two factors that no row holds, as `factor=value & factor=value`. */
export function missingPairs(rows: readonly Combination[]): string[] {
  const factors = Object.keys(FACTORS) as Factor[];
  const missing: string[] = [];
  factors.forEach((a, i) => {
    for (const b of factors.slice(i + 1)) {
      for (const va of FACTORS[a]) {
        for (const vb of FACTORS[b]) {
          if (!rows.some((row) => row[a] === va && row[b] === vb)) missing.push(`${a}=${va} & ${b}=${vb}`);
        }
      }
    }
  });
  return missing;
}

/**
 * PIDs of the etcd servers that serve each of `clientURLs` (their --listen-client-urls), found in /proc
 * in one scan: the lab's hosts are network and mount namespaces only, so their processes are seen here
 * as local ones are. The shell that started a remote member named the URL too, hence the check of the
 * program's name.
 */
export function etcdPidsByURL(clientURLs: readonly string[]): Map<string, number[]> {
  const pids = new Map<string, number[]>(clientURLs.map((url) => [url, []]));
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let argv: string[];
    try {
      argv = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
    } catch {
      continue;
    }
    const program = basename(argv[0] ?? '');
    if (program !== 'etcd' && !/^etcd-\d/.test(program)) continue;
    for (const url of clientURLs) if (argv.includes(url)) pids.get(url)?.push(Number(entry));
  }
  return pids;
}

/** PIDs of the etcd server that serves `clientURL`. */
export function etcdPidsServing(clientURL: string): number[] {
  return etcdPidsByURL([clientURL]).get(clientURL) ?? [];
}

/** Membership events (whatever their result) whose [startedAt, endedAt] overlaps another's. */
export function overlappingChanges(entries: readonly EventEntry[]): string[] {
  const changes = entries
    .filter((e) => e.action !== null && MEMBERSHIP_ACTIONS.has(e.action))
    .map((e) => ({ e, start: Date.parse(e.startedAt), end: Date.parse(e.endedAt ?? e.startedAt) }))
    .sort((a, b) => a.start - b.start);
  const overlaps: string[] = [];
  let open: (typeof changes)[number] | undefined;
  for (const change of changes) {
    if (open !== undefined && change.start < open.end) {
      overlaps.push(`${open.e.action ?? ''} ${open.e.machine ?? ''} [${open.e.startedAt}, ${open.e.endedAt ?? ''}] and ${change.e.action ?? ''} ${change.e.machine ?? ''} [${change.e.startedAt}, ${change.e.endedAt ?? ''}]`);
    }
    if (open === undefined || change.end > open.end) open = change;
  }
  return overlaps;
}

/**
 * Lists a cluster's members straight from etcd every ~150 ms, whatever happens to the cluster: it asks
 * the members it last saw and the client URLs on record (so a cluster rebuilt by a restore, with a new
 * CA, is found again: the client is made anew, with the credentials read again, after a failed list).
 * Keeps the most learners any list held, and the voters' client URLs for the writer.
 */
export class MemberProbe {
  maxLearners = 0;
  /** A member list that held the most learners, for the failure message. */
  maxLearnersList: string[] = [];
  lists = 0;
  /**
   * While on (set it once the membership is settled), every member is also asked alone for the
   * members it has applied: an answer that differs from the cluster's list is kept in `disagreements`,
   * and the PID of each member process that answered the same is kept in `agreedPids`.
   */
  compareEachMember = false;
  readonly disagreements: string[] = [];
  readonly agreedPids = new Set<number>();
  private voters: string[] = [];
  private admin: Etcd3Admin | undefined;
  private running = false;
  private loop: Promise<void> = Promise.resolve();

  constructor(
    private readonly tls: Omit<ClusterAccess, 'endpoints'>,
    private readonly recordedURLs: () => Promise<string[]>,
  ) {}

  voterURLs(): string[] {
    return this.voters;
  }

  start(): void {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        await this.sample();
        await sleep(150);
      }
    })();
  }

  private async sample(): Promise<void> {
    const recorded = await this.recordedURLs().catch(() => []);
    const endpoints = [...new Set([...this.voters, ...recorded])];
    if (endpoints.length === 0) return;
    try {
      this.admin ??= adminFor({ ...this.tls, endpoints }, { callTimeoutMs: 1000 });
      const members = await this.admin.memberList(endpoints);
      this.lists++;
      const learners = members.filter((m) => m.isLearner);
      if (learners.length > this.maxLearners) {
        this.maxLearners = learners.length;
        this.maxLearnersList = members.map((m) => `${m.peerURLs.join(',')}${m.isLearner ? ' (learner)' : ''}`);
      }
      const voters = members.filter((m) => !m.isLearner).flatMap((m) => m.clientURLs.slice(0, 1));
      if (voters.length > 0) this.voters = voters;
      if (this.compareEachMember) await this.compareMembers(this.admin, members);
    } catch {
      // No member answered with these credentials: next time, new clients and the files read again.
      await this.admin?.close();
      this.admin = undefined;
    }
  }

  /** Each member's own list (a local read: what it has applied) against the cluster's. */
  private async compareMembers(admin: Etcd3Admin, members: readonly EtcdMember[]): Promise<void> {
    const reference = memberSet(members);
    const urls = members.flatMap((m) => m.clientURLs.slice(0, 1));
    const pids = etcdPidsByURL(urls);
    await Promise.all(
      urls.map(async (url) => {
        // A member restarting does not answer: nothing to compare until it does.
        const own = await admin.memberList([url], { linearizable: false }).catch(() => undefined);
        if (own === undefined) return;
        if (memberSet(own) !== reference) this.disagreements.push(`${url} lists ${memberSet(own)}, the cluster ${reference}`);
        else for (const pid of pids.get(url) ?? []) this.agreedPids.add(pid);
      }),
    );
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
    await this.admin?.close();
  }
}

function memberSet(members: readonly EtcdMember[]): string {
  return members
    .map((m) => `${m.id}${m.isLearner ? ' (learner)' : ''}`)
    .sort()
    .join(', ');
}

export interface Ack {
  key: string;
  value: string;
  /** When the put was acknowledged (after its answer came). */
  at: number;
  /** The cluster's revision the put created. */
  revision: number;
}

/**
 * Puts one new key at a time under `prefix`, to the voters the probe last saw, until stopped, and
 * keeps every acknowledged put. A put that failed gets no ack and its key is never used again, so a
 * put applied without an answer cannot be mistaken for a lost one.
 */
export class KeyWriter {
  readonly acks: Ack[] = [];
  failures = 0;
  private running = false;
  private loop: Promise<void> = Promise.resolve();

  constructor(
    readonly prefix: string,
    private readonly tls: Omit<ClusterAccess, 'endpoints'>,
    private readonly endpoints: () => string[],
  ) {}

  start(): void {
    this.running = true;
    this.loop = (async () => {
      let kv: Etcd3 | undefined;
      let connected = '';
      for (let n = 0; this.running; n++) {
        const endpoints = this.endpoints();
        if (endpoints.length === 0) {
          await sleep(100);
          continue;
        }
        const key = `${this.prefix}${String(n).padStart(6, '0')}`;
        const value = `written-${String(n)}`;
        try {
          if (kv === undefined || connected !== endpoints.join(',')) {
            kv?.close();
            kv = kvClientFor({ ...this.tls, endpoints });
            connected = endpoints.join(',');
          }
          const answer = await kv.put(key).value(value).exec();
          this.acks.push({ key, value, at: Date.now(), revision: Number(answer.header.revision) });
        } catch {
          this.failures++;
          kv?.close();
          kv = undefined;
          await sleep(100);
        }
        await sleep(20);
      }
      kv?.close();
    })();
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }
}

/** Every key under a prefix, read from the cluster's voters. */
export async function readPrefix(access: ClusterAccess, prefix: string): Promise<Record<string, string>> {
  const kv = kvClientFor(access);
  try {
    return await kv.getAll().prefix(prefix).strings();
  } finally {
    kv.close();
  }
}

/** Puts every entry (each a separate put), through the cluster's voters. */
export async function putAll(access: ClusterAccess, entries: Record<string, string>): Promise<void> {
  const kv = kvClientFor(access);
  try {
    for (const [key, value] of Object.entries(entries)) await kv.put(key).value(value);
  } finally {
    kv.close();
  }
}

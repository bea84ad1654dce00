import { randomBytes } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { join } from 'node:path';
import type { ControlPlane } from '../api/control-plane.ts';
import { parseDurationRange } from '../api/duration.ts';
import { InvalidInputError } from '../api/errors.ts';
import { openKvClient, readTlsCredentials, type KvClientOptions } from '../adapters/etcd3-admin.ts';
import type { EventRecord, MachinePhase, MachineRecord } from '../domain/machine.ts';
import type { Convergence } from '../reconciler/converge.ts';
import { MEASURED_TIMINGS } from '../sim/model-world.ts';
import { destroyUnderLease, EXIT, OUTCOME_EXIT, parseTimeout, reconcileManifest, resolveManifest, type ReconcileRun } from './commands.ts';
import { CliContext } from './context.ts';
import { benchResultPath, MEMBERSHIP_ACTIONS } from './report.ts';

/**
 * `fastplane bench`: the same control plane brought up with `serial` (Cluster API KCP's order) and
 * with `parallel`, on real etcd processes, through the very reconcile path `up` uses. Every run lives
 * in a private state dir under `<state dir>/bench/`, so the user's clusters and records are never
 * touched; the result is saved as `<state dir>/bench/latest.json` for `fastplane report`.
 */

export type Strategy = 'serial' | 'parallel';

export interface BenchFlags {
  replicas: string;
  provisioningDelay: string;
  preload?: string;
  runs: string;
  version?: string;
  timeout: string;
  output: string;
}

interface BenchOptions {
  replicas: number;
  provisioningDelay: string;
  preloadBytes: number | undefined;
  runs: number;
  version: string | undefined;
  timeoutMs: number;
  output: 'json' | 'table';
}

/** One membership change that took effect, in seconds from the start of its run. */
export interface BenchEvent {
  action: string;
  machine: string | null;
  at: number;
  endedAt: number;
}

export interface BenchMachine {
  name: string;
  role: string | null;
  /** Seconds from the start of the run at which the machine entered each phase (its record's phaseTimes). */
  phaseTimes: Partial<Record<MachinePhase, number>>;
  /** Seconds spent in each phase, up to the next one; the phase the machine ended in is open and left out. */
  phaseDurations: Partial<Record<MachinePhase, number>>;
  /** Record created (Pending) to first seen Provisioned. */
  provisioningSeconds: number | null;
  /** First seen Provisioned to the start of its own InitCluster or successful AddLearner: waiting at the gate. */
  gateSeconds: number | null;
  /** Successful AddLearner sent to PromoteLearner succeeded: what one join holds the membership gate. */
  joinSeconds: number | null;
  /** Learner first answered its status (phase Learner) to PromoteLearner succeeded. */
  promotionLatencySeconds: number | null;
  /** Learner process started (AddLearner done) to PromoteLearner succeeded: start-up plus catch-up. */
  catchUpSeconds: number | null;
  /** Whether its etcd log shows a database snapshot received from the leader (null: no log to read). */
  receivedSnapshot: boolean | null;
  /** How the received snapshot went, from the member's own log; null without one. */
  snapshot: LearnerSnapshot | null;
}

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

export interface StrategyRun {
  strategy: Strategy;
  cluster: string;
  /** Seconds from applying the spec to the pass that saw every voter healthy (preload excluded). */
  seconds: number;
  /** The critical-path lower bound for this run's measured provisioning times (see criticalPathBound). */
  boundSeconds: number;
  bound: BoundInputs;
  /** With --preload: the 1-member bring-up, the key writes and the scale-up, each timed alone. */
  stages?: { upSeconds: number; preloadSeconds: number; preloadKeys: number; dbSizeBytes: number | null; scaleSeconds: number };
  passes: number;
  /** Refused membership attempts (etcd's 5 s rule, learner not yet in sync), retried by the next pass. */
  refusals: number;
  machines: BenchMachine[];
  membership: BenchEvent[];
}

export interface BenchRun {
  run: number;
  order: Strategy[];
  serial: StrategyRun;
  parallel: StrategyRun;
  speedup: number;
  efficiency: number;
}

export interface BenchFigures {
  serialSeconds: number;
  parallelSeconds: number;
  boundSeconds: number;
  speedup: number;
  efficiency: number;
  promotionLatencySeconds: { serial: number | null; parallel: number | null };
}

export interface BenchResult extends BenchFigures {
  kind: 'fastplane-bench';
  startedAt: string;
  finishedAt: string;
  /** loadAverage: 1, 5 and 15 minute load when the bench started: other work on the host skews the figures. */
  host: { cpus: number; cpuModel: string; memoryGiB: number; os: string; kernel: string; node: string; loadAverage: number[] };
  settings: { replicas: number; provisioningDelay: string; version: string; runs: number; preloadBytes: number | null };
  /** The headline figures above are these medians over runs. */
  medians: BenchFigures;
  /** With --preload: learner catch-up against copying the same bytes over a loopback TCP socket. */
  preload: {
    bytes: number;
    valueBytes: number;
    /** Median size of the snapshots sent (the bytes copied below); the preloaded bytes when no learner got one. */
    snapshotBytes: number;
    /** Pushing snapshotBytes through a TCP connection on 127.0.0.1. */
    loopbackCopySeconds: number;
    /** Median of catchUpSeconds over joined learners: process start to promotion. */
    catchUpSeconds: number | null;
    catchUpOverCopy: number | null;
    /** Median of snapshot.appliedAfterSeconds: process start to snapshot applied. */
    dataCatchUpSeconds: number | null;
    dataCatchUpOverCopy: number | null;
    /** Median of snapshot.receiveSeconds: etcd's own transfer of the snapshot. */
    snapshotReceiveSeconds: number | null;
    receiveOverCopy: number | null;
    /** Joined learners whose log shows a received snapshot, of all joined learners. */
    learnersSentSnapshot: string;
    /** Learners with a snapshot whose first publish timed out (see LearnerSnapshot.publishTimedOut). */
    publishTimeouts: string;
  } | null;
  runs: BenchRun[];
}

/**
 * 4 KiB values: 100 MB is then ~24k writes, well past the local provider's --snapshot-count of 10,000,
 * so the leader has snapshotted and compacted its log and every learner must be sent a snapshot. With
 * 10 KiB values 100 MB would be ~9.8k writes, replayed from the log instead.
 */
const VALUE_BYTES = 4 * 1024;
const MAX_PRELOAD_BYTES = 1024 ** 3;
const PRELOAD_CONCURRENCY = 32;
const SIZE = /^(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?$/i;
const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1e3, kib: 1024, mb: 1e6, mib: 1024 ** 2, gb: 1e9, gib: 1024 ** 3 };

/** `100MB` (decimal units), `64MiB` (binary units) or a plain byte count; undefined when not a size. */
export function parseSize(text: string): number | undefined {
  const match = SIZE.exec(text.trim());
  if (!match) return undefined;
  const factor = SIZE_UNITS[(match[2] ?? 'b').toLowerCase()];
  return factor === undefined ? undefined : Math.round(Number(match[1]) * factor);
}

export function median(values: readonly number[]): number | undefined {
  if (values.length === 0) return undefined;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

const seconds = (ms: number): number => Math.round(ms) / 1000;
/** A median of second figures, to the millisecond they were measured with (no 0.0045000000000000005). */
const medianSeconds = (values: readonly number[]): number | undefined => {
  const m = median(values);
  return m === undefined ? undefined : seconds(m * 1000);
};
const ratio = (a: number, b: number): number => (b > 0 ? Math.round((a / b) * 1000) / 1000 : 0);

/** Every flag checked before anything is created; each message names its flag (exit 2). */
function parseBenchFlags(flags: BenchFlags): BenchOptions {
  const problems: string[] = [];
  const replicas = /^\d+$/.test(flags.replicas) ? Number(flags.replicas) : NaN;
  if (!Number.isInteger(replicas) || replicas < 3 || replicas > 9 || replicas % 2 === 0) {
    problems.push(`--replicas: must be an odd number from 3 to 9 (a comparison needs joins), got ${flags.replicas}`);
  }
  if (parseDurationRange(flags.provisioningDelay) === undefined) {
    problems.push(`--provisioning-delay: must be a duration (30s) or a range (20s-40s), got ${flags.provisioningDelay}`);
  }
  const runs = /^\d+$/.test(flags.runs) ? Number(flags.runs) : NaN;
  if (!Number.isInteger(runs) || runs < 1 || runs > 50) problems.push(`--runs: must be a whole number from 1 to 50, got ${flags.runs}`);
  let preloadBytes: number | undefined;
  if (flags.preload !== undefined) {
    preloadBytes = parseSize(flags.preload);
    if (preloadBytes === undefined || preloadBytes <= 0 || preloadBytes > MAX_PRELOAD_BYTES) {
      problems.push(`--preload: must be a size from 1B to 1GiB such as 100MB or 64MiB, got ${flags.preload}`);
    }
  }
  if (flags.output !== 'json' && flags.output !== 'table') problems.push(`-o: must be json or table, got ${flags.output}`);
  let timeoutMs = 0;
  try {
    timeoutMs = parseTimeout(flags.timeout);
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    problems.push(...error.problems);
  }
  if (problems.length > 0) throw new InvalidInputError(problems);
  return {
    replicas,
    provisioningDelay: flags.provisioningDelay,
    preloadBytes,
    runs,
    version: flags.version,
    timeoutMs,
    output: flags.output === 'json' ? 'json' : 'table',
  };
}

/** What a bound is computed from, kept in the result so every bound can be checked by hand. */
export interface BoundInputs {
  provisioningSeconds: number[];
  initSeconds: number;
  minJoinSeconds: number;
  gapSeconds: number;
  replicas: number;
  preloaded: boolean;
}

/**
 * The critical-path lower bound of a scale-up, from the run's measured provisioning times and etcd's
 * limits: nothing can finish before the slowest machine is provisioned and then joins; and the joins
 * are serial, the first after the first machine is provisioned and initialised, each next add at least
 * `gap` after the previous one, where gap = etcd's 5 s peer-connection rule (or the join itself, when a
 * join takes longer than that, e.g. a big snapshot):
 *   bound = max(slowest provisioning, first provisioning + init + (N-2) x gap) + minimal join
 * With a preload the first member is brought up alone (provisioning + init), then the other N-1 are
 * created together: bound = first + init + max(slowest new, first new + (N-2) x gap) + minimal join.
 */
export function criticalPathBound(inputs: BoundInputs): number {
  const { initSeconds, minJoinSeconds, gapSeconds, replicas } = inputs;
  const waits = Math.max(0, replicas - 2) * gapSeconds;
  if (!inputs.preloaded) {
    const slowest = Math.max(...inputs.provisioningSeconds);
    const first = Math.min(...inputs.provisioningSeconds);
    return seconds(1000 * (Math.max(slowest, first + initSeconds + waits) + minJoinSeconds));
  }
  const [initial = 0, ...added] = inputs.provisioningSeconds;
  const joins = added.length > 0 ? Math.max(Math.max(...added), Math.min(...added) + waits) : 0;
  return seconds(1000 * (initial + initSeconds + joins + minJoinSeconds));
}

/** Successful membership changes, oldest first. */
function membershipOf(events: EventRecord[]): EventRecord[] {
  return events.filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action) && e.outcome === 'Succeeded').sort((a, b) => a.at - b.at);
}

/** The member's etcd log (the local provider keeps it at clusters/<cluster>/machines/<name>/etcd.log); null if absent. */
function memberLog(stateDir: string, record: MachineRecord): string | null {
  try {
    return readFileSync(join(stateDir, 'clusters', record.cluster, 'machines', record.name, 'etcd.log'), 'utf8');
  } catch {
    return null;
  }
}

const SNAPSHOT_RECEIVING = 'receiving database snapshot';
const SNAPSHOT_SAVED = 'received and saved database snapshot';
const SNAPSHOT_APPLIED = 'applied snapshot';
const PUBLISH_FAILED = 'failed to publish local member to cluster through raft';

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

function machineMetrics(record: MachineRecord, changes: EventRecord[], t0: number, log: string | null): BenchMachine {
  const phases = (Object.entries(record.phaseTimes) as [MachinePhase, number][]).sort((a, b) => a[1] - b[1]);
  const phaseTimes: BenchMachine['phaseTimes'] = {};
  const phaseDurations: BenchMachine['phaseDurations'] = {};
  phases.forEach(([phase, at], i) => {
    phaseTimes[phase] = seconds(at - t0);
    const next = phases[i + 1];
    if (next) phaseDurations[phase] = seconds(next[1] - at);
  });
  const mine = changes.filter((e) => e.machine === record.name);
  const promote = mine.find((e) => e.action === 'PromoteLearner');
  const add = promote ? mine.filter((e) => e.action === 'AddLearner' && e.at <= promote.at).pop() : undefined;
  const promotedAt = promote?.endedAt ?? promote?.at;
  const { Pending: pending, Provisioned: provisioned, Learner: learner } = record.phaseTimes;
  const admitted = mine.find((e) => e.action === 'InitCluster' || e.action === 'AddLearner');
  const snapshot = log !== null && add ? learnerSnapshotFromLog(log, add.endedAt ?? add.at) : null;
  return {
    name: record.name,
    role: record.role ?? null,
    phaseTimes,
    phaseDurations,
    provisioningSeconds: pending !== undefined && provisioned !== undefined ? seconds(provisioned - pending) : null,
    gateSeconds: admitted && provisioned !== undefined ? seconds(Math.max(0, admitted.at - provisioned)) : null,
    joinSeconds: add && promotedAt !== undefined ? seconds(promotedAt - add.at) : null,
    promotionLatencySeconds: learner !== undefined && promotedAt !== undefined ? seconds(promotedAt - learner) : null,
    catchUpSeconds: add && promotedAt !== undefined ? seconds(promotedAt - (add.endedAt ?? add.at)) : null,
    receivedSnapshot: log === null ? null : log.includes(SNAPSHOT_SAVED),
    snapshot,
  };
}

class BenchRunFailed extends Error {
  constructor(
    readonly outcome: Convergence['outcome'],
    message: string,
  ) {
    super(message);
  }
}

function mustConverge(run: ReconcileRun, what: string): void {
  if (run.outcome !== 'Converged') throw new BenchRunFailed(run.outcome, `${what} ended ${run.outcome}, not Converged; see fastplane.log in the bench dir`);
}

/** Time to push `bytes` through a TCP connection on 127.0.0.1: what copying a snapshot must cost at least. */
export async function measureLoopbackCopy(bytes: number): Promise<number> {
  const chunk = randomBytes(1024 * 1024);
  let started = 0;
  const server = createServer();
  const done = new Promise<number>((resolve, reject) => {
    server.on('connection', (socket) => {
      let received = 0;
      socket.on('data', (data: Buffer) => {
        received += data.length;
        if (received >= bytes) {
          resolve(performance.now() - started);
          socket.destroy();
        }
      });
      socket.on('error', reject);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const client = createConnection({ host: '127.0.0.1', port });
    await new Promise<void>((resolve, reject) => client.once('connect', resolve).once('error', reject));
    started = performance.now();
    let left = bytes;
    while (left > 0) {
      const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
      left -= piece.length;
      if (!client.write(piece)) await new Promise((resolve) => client.once('drain', resolve));
    }
    client.end();
    const ms = await done;
    client.destroy();
    return ms;
  } finally {
    server.close();
  }
}

/** Writes `bytes` of values (VALUE_BYTES each, the last one shorter) under /fastplane-bench/preload/. */
async function preloadKeys(endpoints: string[], bytes: number, credentials: KvClientOptions['credentials']): Promise<number> {
  const kv = openKvClient(endpoints, { callTimeoutMs: 30_000, credentials });
  // Random bytes: the snapshot then costs what real data would (nothing compresses it).
  const value = randomBytes(VALUE_BYTES);
  const keys = Math.ceil(bytes / VALUE_BYTES);
  let next = 0;
  try {
    const writer = async (): Promise<void> => {
      while (next < keys) {
        const i = next++;
        const size = i === keys - 1 ? bytes - i * VALUE_BYTES : VALUE_BYTES;
        await kv.put(`/fastplane-bench/preload/${String(i).padStart(8, '0')}`).value(value.subarray(0, size));
      }
    };
    await Promise.all(Array.from({ length: PRELOAD_CONCURRENCY }, writer));
  } finally {
    kv.close();
  }
  return keys;
}

/**
 * The bench dir gets its own state store and provider files; the provider picks a cluster's address
 * slot from its own slots.json, so the slots the user's clusters hold are copied in first: bench
 * machines then never take an address a user's member listens on.
 */
function prepareWorkDir(stateDir: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const dir = join(stateDir, 'bench', `run-${stamp}-${String(process.pid)}`);
  mkdirSync(join(dir, 'provider'), { recursive: true });
  const slots = join(stateDir, 'provider', 'slots.json');
  if (existsSync(slots)) copyFileSync(slots, join(dir, 'provider', 'slots.json'));
  return dir;
}

async function runStrategy(ctx: CliContext, options: BenchOptions, strategy: Strategy, run: number): Promise<StrategyRun> {
  const name = `bench-${String(run)}-${strategy}`;
  const specFlags = { name, strategy, provisioningDelay: options.provisioningDelay, ...(options.version === undefined ? {} : { version: options.version }) };
  const replicas = String(options.replicas);
  const preload = options.preloadBytes;
  let manifest: ControlPlane = await resolveManifest(ctx, { ...specFlags, replicas: preload === undefined ? replicas : '1' });
  try {
    const up = await reconcileManifest(ctx, manifest, options.timeoutMs);
    mustConverge(up, `${strategy} run ${String(run)}`);
    let last = up;
    let elapsedMs = up.settledAt - up.startedAt;
    let stages: StrategyRun['stages'];
    if (preload !== undefined) {
      // Method: one member first, the keys written into it, then the scale-up to N, so that every
      // learner has to catch up `preload` bytes, as a snapshot once the writes pass the provider's
      // snapshot count (see VALUE_BYTES). The write time is not counted.
      const endpoints = (await ctx.store.listMachines(name)).flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));
      const writeStart = Date.now();
      const tls = ctx.provider(manifest).clientTls(name);
      const keys = await preloadKeys(endpoints, preload, tls === undefined ? undefined : readTlsCredentials(tls));
      const preloadMs = Date.now() - writeStart;
      const dbSize = await ctx
        .etcd(manifest)
        .status(endpoints[0] ?? '')
        .then(
          (status) => status.dbSize,
          () => null,
        );
      manifest = await resolveManifest(ctx, { name, replicas });
      last = await reconcileManifest(ctx, manifest, options.timeoutMs);
      mustConverge(last, `${strategy} run ${String(run)} (scale-up after the preload)`);
      stages = {
        upSeconds: seconds(elapsedMs),
        preloadSeconds: seconds(preloadMs),
        preloadKeys: keys,
        dbSizeBytes: dbSize,
        scaleSeconds: seconds(last.settledAt - last.startedAt),
      };
      elapsedMs += last.settledAt - last.startedAt;
    }
    return await summarize(ctx, name, strategy, options, up.startedAt, elapsedMs, up.passes + (last === up ? 0 : last.passes), stages);
  } finally {
    // `down` between runs: every member stopped by PID, its data and records gone.
    await destroyUnderLease(ctx, manifest, { waitMs: 0, force: true });
  }
}

async function summarize(
  ctx: CliContext,
  name: string,
  strategy: Strategy,
  options: BenchOptions,
  t0: number,
  elapsedMs: number,
  passes: number,
  stages: StrategyRun['stages'],
): Promise<StrategyRun> {
  const records = (await ctx.store.listMachines(name)).sort((a, b) => a.ordinal - b.ordinal);
  const events = await ctx.store.listEvents(name);
  const changes = membershipOf(events);
  const machines = records.map((r) => machineMetrics(r, changes, t0, memberLog(ctx.stateDir, r)));
  const init = records.find((r) => r.role === 'init');
  const initSeconds = init?.phaseTimes.Voter !== undefined && init.phaseTimes.Provisioned !== undefined ? seconds(init.phaseTimes.Voter - init.phaseTimes.Provisioned) : 0;
  const joins = machines.flatMap((m) => (m.joinSeconds === null ? [] : [m.joinSeconds]));
  const minJoinSeconds = joins.length > 0 ? Math.min(...joins) : 0;
  // The init machine first: with a preload it was provisioned alone, before the others.
  const ordered = [...machines].sort((a, b) => Number(b.role === 'init') - Number(a.role === 'init'));
  const bound: BoundInputs = {
    provisioningSeconds: ordered.flatMap((m) => (m.provisioningSeconds === null ? [] : [m.provisioningSeconds])),
    initSeconds,
    minJoinSeconds,
    // etcd's 5 s peer-connection rule, the figure the model uses too (docs/etcd-behaviour.md).
    gapSeconds: Math.max(MEASURED_TIMINGS.peerHealthGateMs / 1000, minJoinSeconds),
    replicas: options.replicas,
    preloaded: options.preloadBytes !== undefined,
  };
  const result: StrategyRun = {
    strategy,
    cluster: name,
    seconds: seconds(elapsedMs),
    boundSeconds: criticalPathBound(bound),
    bound,
    passes,
    refusals: events.filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action) && e.outcome !== 'Succeeded').length,
    machines,
    membership: changes.map((e) => ({ action: e.action ?? '', machine: e.machine ?? null, at: seconds(e.at - t0), endedAt: seconds((e.endedAt ?? e.at) - t0) })),
  };
  if (stages) result.stages = stages;
  return result;
}

function figures(serial: number[], parallel: number[], bound: number[], latency: { serial: number[]; parallel: number[] }): BenchFigures {
  const s = medianSeconds(serial) ?? 0;
  const p = medianSeconds(parallel) ?? 0;
  const b = medianSeconds(bound) ?? 0;
  return {
    serialSeconds: s,
    parallelSeconds: p,
    boundSeconds: b,
    speedup: ratio(s, p),
    efficiency: ratio(b, p),
    promotionLatencySeconds: { serial: medianSeconds(latency.serial) ?? null, parallel: medianSeconds(latency.parallel) ?? null },
  };
}

export function hostInfo(): BenchResult['host'] {
  let os = 'unknown';
  try {
    os = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? os;
  } catch {
    // Not Linux: the kernel release still says something.
  }
  const cpuList = cpus();
  return {
    cpus: cpuList.length,
    cpuModel: cpuList[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 1024 ** 3),
    os,
    kernel: release(),
    node: process.version,
    loadAverage: loadavg().map((n) => Math.round(n * 100) / 100),
  };
}

function latencies(runs: BenchRun[], strategy: Strategy): number[] {
  return runs.flatMap((r) => r[strategy].machines.flatMap((m) => (m.promotionLatencySeconds === null ? [] : [m.promotionLatencySeconds])));
}

function renderTable(result: BenchResult): string {
  const s = result.settings;
  const fmt = (n: number | null): string => (n === null ? '-' : n.toFixed(2));
  const lines = [
    `fastplane bench: ${String(s.replicas)} replicas, provisioning ${s.provisioningDelay}, etcd ${s.version}, ${String(s.runs)} run(s)${s.preloadBytes === null ? '' : `, preload ${String(s.preloadBytes)} bytes`}`,
    `host: ${String(result.host.cpus)} x ${result.host.cpuModel}, ${String(result.host.memoryGiB)} GiB, ${result.host.os}, node ${result.host.node}, load ${result.host.loadAverage.join(' ')}`,
    '',
    'RUN  ORDER            SERIAL s  PARALLEL s  BOUND s  SPEEDUP  EFFICIENCY',
    ...result.runs.map((r) =>
      [String(r.run).padEnd(4), r.order.join(',').padEnd(16), fmt(r.serial.seconds).padStart(8), fmt(r.parallel.seconds).padStart(10), fmt(r.parallel.boundSeconds).padStart(7), fmt(r.speedup).padStart(7), fmt(r.efficiency).padStart(10)].join(' '),
    ),
    `med  ${''.padEnd(16)} ${fmt(result.serialSeconds).padStart(8)} ${fmt(result.parallelSeconds).padStart(10)} ${fmt(result.boundSeconds).padStart(7)} ${fmt(result.speedup).padStart(7)} ${fmt(result.efficiency).padStart(10)}`,
    '',
    `promotion latency after catch-up (median): serial ${fmt(result.promotionLatencySeconds.serial)} s, parallel ${fmt(result.promotionLatencySeconds.parallel)} s`,
  ];
  if (result.preload) {
    const p = result.preload;
    lines.push(
      `preload ${String(p.bytes)} bytes; learners sent a snapshot ${p.learnersSentSnapshot}, median ${String(p.snapshotBytes)} bytes; loopback copy of those bytes ${fmt(p.loopbackCopySeconds)} s`,
      `  learner catch-up to promotion (median) ${fmt(p.catchUpSeconds)} s (x${fmt(p.catchUpOverCopy)} the copy); to snapshot applied ${fmt(p.dataCatchUpSeconds)} s (x${fmt(p.dataCatchUpOverCopy)}); snapshot transfer ${fmt(p.snapshotReceiveSeconds)} s (x${fmt(p.receiveOverCopy)})`,
      `  first publish timed out (etcd's 7 s request timeout, the snapshot held the publish entry): ${p.publishTimeouts} learners`,
    );
  }
  for (const strategy of ['serial', 'parallel'] as const) {
    const run = result.runs[0]?.[strategy];
    if (!run) continue;
    lines.push('', `run 1, ${strategy} (seconds; join = AddLearner sent to PromoteLearner done):`, 'MACHINE              ROLE  PROVISIONING  AT GATE   JOIN  PROMOTION LATENCY');
    for (const m of run.machines) {
      lines.push(
        [m.name.padEnd(20), (m.role ?? '-').padEnd(4), fmt(m.provisioningSeconds).padStart(13), fmt(m.gateSeconds).padStart(8), fmt(m.joinSeconds).padStart(6), fmt(m.promotionLatencySeconds).padStart(18)].join(' '),
      );
    }
  }
  return lines.join('\n');
}

/**
 * Stops the bench clusters when the user interrupts a bench: their members run detached otherwise.
 * Twice, because the reconcile loop is still running and may restart a member the first pass stopped.
 */
function stopOnSignal(bench: CliContext, workDir: string): () => void {
  const onSignal = (signal: NodeJS.Signals): void => {
    process.stderr.write(`bench: ${signal}: stopping the bench clusters\n`);
    const stopAll = async (): Promise<void> => {
      const manifests = (await bench.store.listControlPlanes()).map((cp) => cp.manifest);
      await Promise.all(manifests.map((manifest) => destroyUnderLease(bench, manifest, { waitMs: 0, force: true })));
    };
    void stopAll()
      .then(stopAll)
      .then(() => {
        rmSync(workDir, { recursive: true, force: true });
      })
      .finally(() => process.exit(130));
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}

export async function benchCommand(ctx: CliContext, flags: BenchFlags): Promise<number> {
  const options = parseBenchFlags(flags);
  const startedAt = new Date();
  const host = hostInfo();
  const workDir = prepareWorkDir(ctx.stateDir);
  const bench = new CliContext(workDir, ctx.log.level);
  const restoreSignals = stopOnSignal(bench, workDir);
  const runs: BenchRun[] = [];
  let keepWorkDir = false;
  let version: string;
  try {
    // The spec every run uses, checked (and its etcd binary found) before any machine exists.
    version = (await resolveManifest(bench, { name: 'bench', provisioningDelay: options.provisioningDelay, ...(options.version === undefined ? {} : { version: options.version }) })).spec.version;
    for (let run = 1; run <= options.runs; run++) {
      // Alternate which strategy goes first, so a warm page cache or a drifting host favours neither.
      const order: Strategy[] = run % 2 === 1 ? ['serial', 'parallel'] : ['parallel', 'serial'];
      const done: Partial<Record<Strategy, StrategyRun>> = {};
      for (const strategy of order) {
        process.stderr.write(`bench: run ${String(run)}/${String(options.runs)}, ${strategy}\n`);
        done[strategy] = await runStrategy(bench, options, strategy, run);
      }
      const { serial, parallel } = done;
      if (!serial || !parallel) throw new Error('a bench run lost a strategy');
      runs.push({ run, order, serial, parallel, speedup: ratio(serial.seconds, parallel.seconds), efficiency: ratio(parallel.boundSeconds, parallel.seconds) });
    }
  } catch (error) {
    // Kept after a failed run: its fastplane.log says what went wrong. Its clusters are down either way.
    keepWorkDir = !(error instanceof InvalidInputError);
    if (error instanceof BenchRunFailed) {
      process.stderr.write(`error: bench: ${error.message} (${workDir})\n`);
      return OUTCOME_EXIT[error.outcome];
    }
    throw error;
  } finally {
    restoreSignals();
    await bench.close();
    if (!keepWorkDir) rmSync(workDir, { recursive: true, force: true });
  }

  const headline = figures(
    runs.map((r) => r.serial.seconds),
    runs.map((r) => r.parallel.seconds),
    runs.map((r) => r.parallel.boundSeconds),
    { serial: latencies(runs, 'serial'), parallel: latencies(runs, 'parallel') },
  );
  let preload: BenchResult['preload'] = null;
  if (options.preloadBytes !== undefined) {
    const joined = runs.flatMap((r) => [r.serial, r.parallel]).flatMap((s) => s.machines.filter((m) => m.catchUpSeconds !== null));
    const snapshots = joined.flatMap((m) => (m.snapshot === null ? [] : [m.snapshot]));
    const snapshotBytes = Math.round(median(snapshots.map((s) => s.bytes).filter((b) => b > 0)) ?? options.preloadBytes);
    const copySeconds = seconds(await measureLoopbackCopy(snapshotBytes));
    const catchUp = medianSeconds(joined.flatMap((m) => (m.catchUpSeconds === null ? [] : [m.catchUpSeconds]))) ?? null;
    const dataCatchUp = medianSeconds(snapshots.map((s) => s.appliedAfterSeconds)) ?? null;
    const receive = medianSeconds(snapshots.map((s) => s.receiveSeconds)) ?? null;
    const overCopy = (value: number | null): number | null => (value === null ? null : ratio(value, copySeconds));
    preload = {
      bytes: options.preloadBytes,
      valueBytes: VALUE_BYTES,
      snapshotBytes,
      loopbackCopySeconds: copySeconds,
      catchUpSeconds: catchUp,
      catchUpOverCopy: overCopy(catchUp),
      dataCatchUpSeconds: dataCatchUp,
      dataCatchUpOverCopy: overCopy(dataCatchUp),
      snapshotReceiveSeconds: receive,
      receiveOverCopy: overCopy(receive),
      learnersSentSnapshot: `${String(joined.filter((m) => m.receivedSnapshot === true).length)}/${String(joined.length)}`,
      publishTimeouts: `${String(snapshots.filter((s) => s.publishTimedOut).length)}/${String(snapshots.length)}`,
    };
  }
  const result: BenchResult = {
    kind: 'fastplane-bench',
    ...headline,
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    host,
    settings: { replicas: options.replicas, provisioningDelay: options.provisioningDelay, version, runs: options.runs, preloadBytes: options.preloadBytes ?? null },
    medians: headline,
    preload,
    runs,
  };
  const text = JSON.stringify(result, null, 2);
  const path = benchResultPath(ctx.stateDir);
  writeFileSync(join(ctx.stateDir, 'bench', `bench-${startedAt.toISOString().replace(/[:.]/g, '-')}.json`), `${text}\n`);
  writeFileSync(path, `${text}\n`);
  process.stdout.write(`${options.output === 'json' ? text : renderTable(result)}\n`);
  process.stderr.write(`bench: result saved to ${path}\n`);
  return EXIT.converged;
}

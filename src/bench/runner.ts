import { createWriteStream } from 'node:fs';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import type { ControlPlane } from '../api/control-plane.ts';
import { InvalidInputError } from '../api/errors.ts';
import { compareVersions } from '../api/versions.ts';
import { Etcd3Admin, readTlsCredentials } from '../adapters/etcd/etcd3-admin.ts';
import { Etcd3Maintenance } from '../adapters/etcd/etcd3-maintenance.ts';
import { sha256OfFile } from '../adapters/state-files.ts';
import type { MachineFacts, MachineProvider } from '../ports/machine-provider.ts';
import type { EventRecord, MachineRecord, SnapshotSource } from '../domain/machine.ts';
import type { Convergence } from '../reconciler/converge.ts';
import { calibrate, type Calibration, type CalibrationWorld } from './calibration.ts';
import type { LinkLimit } from './bench-lab.ts';
import { hostInfo, loadAverage } from './host-info.ts';
import type { LinkBytes } from './network-lab.ts';
import { summarizeRun, type RunEvidence } from './metrics.ts';
import { preloadKeys, summarizePreload } from './preload.ts';
import { PromotionWatcher } from './promotion-watcher.ts';
import { ComponentWatcher } from './component-watcher.ts';
import type { ComponentPids } from './process-memory.ts';
import type { BenchFigures, BenchMethod, BenchResult, BenchRun, ModeFigures, Strategy, StrategyRun } from './result.ts';
import { medianSeconds, ratio, seconds } from './stats.ts';

/**
 * The bench itself: a calibration on a throwaway cluster, then the same control plane brought up with
 * `serial` (Cluster API KCP's order) and `parallel` on real etcd processes, through the very reconcile
 * path `up` uses, watched from outside by a PromotionWatcher. It reaches the CLI's state through a
 * BenchHost, so it depends on no command code.
 */

export interface BenchOptions {
  replicas: number;
  provisioningDelay: string;
  preloadBytes: number | undefined;
  runs: number;
  version: string | undefined;
  timeoutMs: number;
  /** The strategies to run, each once per run. */
  modes: Strategy[];
  /** Each host's link on the network lab (tc rate), or undefined on this host's loopback. */
  hostBandwidth: string | undefined;
  /** Which directions of each host's link the lab limits; both unless --asymmetric-lab. */
  linkLimit: LinkLimit;
  method: BenchMethod;
  /** `--kubernetes`: every machine runs the Kubernetes control plane of this version; undefined: etcd only. */
  kubernetes: string | undefined;
  /** Tests only: a calibration taken as given instead of measured (no keyspace, so no snapshot to restore). */
  calibration?: Calibration;
}

/** How one reconcile of a spec ended (epoch ms). */
export interface Reconciled {
  outcome: Convergence['outcome'];
  startedAt: number;
  /** When the last pass observed the result: for Converged, the moment every voter was seen healthy. */
  settledAt: number;
  passes: number;
}

export interface SpecFields {
  name: string;
  replicas: number;
  strategy?: 'serial' | 'parallel';
  reconfigurationCheck?: 'etcd' | 'fastplane';
  maxLearners?: 'auto' | number;
  provisioningDelay?: string;
  version?: string;
  /** spec.kubernetes.version */
  kubernetes?: string;
}

/** What the bench needs from the CLI: a private state dir's specs, reconciles, records and provider. */
export interface BenchHost {
  readonly stateDir: string;
  /** The validated spec (its etcd binary found) for these fields, on top of the stored one if any. */
  manifest(fields: SpecFields): Promise<ControlPlane>;
  reconcile(manifest: ControlPlane, timeoutMs: number): Promise<Reconciled>;
  /** Like `fastplane down`: every member stopped by PID, data and records gone. */
  destroy(manifest: ControlPlane): Promise<void>;
  records(cluster: string): Promise<{ machines: MachineRecord[]; events: EventRecord[] }>;
  provider(manifest: ControlPlane): MachineProvider;
  /** A member's etcd log, wherever its machine keeps it; null when it cannot be read. */
  memberLog(cluster: string, machine: string): string | null;
  /** Records a new control plane that starts from `snapshot`, as `fastplane restore` does. */
  restore(manifest: ControlPlane, snapshot: SnapshotSource): Promise<void>;
  /** On a lab: the bytes each host has sent and received over its link so far, by address; null on loopback. */
  linkBytes(): Map<string, LinkBytes> | null;
  /** The PIDs of a machine's member and components, as its provider recorded them; empty where they cannot be read. */
  componentPids(cluster: string, machine: string): ComponentPids;
}

export class BenchRunFailed extends Error {
  constructor(
    readonly outcome: Convergence['outcome'],
    message: string,
  ) {
    super(message);
  }
}

function mustConverge(run: Reconciled, what: string): void {
  if (run.outcome !== 'Converged') throw new BenchRunFailed(run.outcome, `${what} ended ${run.outcome}, not Converged; see fastplane.log in the bench dir`);
}

/** An etcd client of the bench's own, apart from fastplane's: the watcher and the preload's status read. */
function ownClient(host: BenchHost, manifest: ControlPlane): Etcd3Admin {
  const tls = host.provider(manifest).clientTls(manifest.metadata.name);
  return new Etcd3Admin(tls === undefined ? {} : { credentials: () => readTlsCredentials(tls) });
}

/** How many bytes `stream` wrote, counted and dropped. */
async function streamedBytes(stream: (sink: Writable) => Promise<void>): Promise<number> {
  let bytes = 0;
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      bytes += chunk.length;
      done();
    },
  });
  await stream(sink);
  return bytes;
}

/** `learnersAtOnce`: the most learners a run's leader may feed at once, the readers its outbound rate is measured with. */
async function calibration(host: BenchHost, version: string, kubernetes: string | undefined, keyspaceBytes: number | undefined, learnersAtOnce: number, onSnapshot?: (snapshot: SnapshotSource) => void): Promise<Calibration> {
  const manifest = await host.manifest({ name: 'bench-calibration', replicas: 1, provisioningDelay: '0s', version, ...(kubernetes === undefined ? {} : { kubernetes }) });
  const admin = ownClient(host, manifest);
  const provider = host.provider(manifest);
  const tls = provider.clientTls(manifest.metadata.name);
  const maintenance = new Etcd3Maintenance(tls === undefined ? {} : { credentials: () => readTlsCredentials(tls) });
  const keyspace =
    keyspaceBytes === undefined
      ? undefined
      : {
          bytes: keyspaceBytes,
          write: (endpoints: string[]) => preloadKeys(endpoints, keyspaceBytes, tls === undefined ? undefined : readTlsCredentials(tls)),
          streams: learnersAtOnce,
          streamDatabase: (endpoint: string) => streamedBytes((sink) => maintenance.snapshot(endpoint, sink)),
          ...(onSnapshot === undefined
            ? {}
            : {
                save: async (endpoint: string) => {
                  const file = join(host.stateDir, 'keyspace.db');
                  // The snapshot call ends the file once every chunk is written.
                  await maintenance.snapshot(endpoint, createWriteStream(file));
                  const snapshot = { file, sha256: await sha256OfFile(file) };
                  onSnapshot(snapshot);
                  return snapshot;
                },
              }),
        };
  try {
    const components = kubernetesWorld(host, manifest, provider);
    return await calibrate({ provider, admin, cluster: manifest.metadata.name, version, ...(keyspace === undefined ? {} : { keyspace }), ...(components === undefined ? {} : { kubernetes: components }) });
  } finally {
    await maintenance.close();
    await admin.close();
    await provider.destroyCluster(manifest.metadata.name);
  }
}

/** The provider's Kubernetes machines, the spec's launch and the machines' PIDs, when the spec runs the Kubernetes control plane. */
function kubernetesWorld(host: BenchHost, manifest: ControlPlane, provider: MachineProvider): NonNullable<CalibrationWorld['kubernetes']> | undefined {
  const spec = manifest.spec.kubernetes;
  if (spec === undefined) return undefined;
  if (provider.kubernetes === undefined) throw new InvalidInputError([`--kubernetes: the ${manifest.spec.provider.name} provider does not run Kubernetes components`]);
  const cluster = manifest.metadata.name;
  return { machines: provider.kubernetes, launch: { version: spec.version, ...(spec.binaries === undefined ? {} : { binaries: spec.binaries }) }, pids: (machine) => host.componentPids(cluster, machine) };
}

/** Each mode as spec fields: guarded swaps etcd's add rule for fastplane's checks, learners lifts the one-learner gate. */
const MODE_FIELDS: Record<Strategy, Pick<SpecFields, 'strategy' | 'reconfigurationCheck' | 'maxLearners'>> = {
  serial: { strategy: 'serial', maxLearners: 1 },
  parallel: { strategy: 'parallel', maxLearners: 1 },
  guarded: { strategy: 'parallel', reconfigurationCheck: 'fastplane', maxLearners: 1 },
  learners: { strategy: 'parallel', maxLearners: 'auto' },
  'guarded-learners': { strategy: 'parallel', reconfigurationCheck: 'fastplane', maxLearners: 'auto' },
};

/** `cores`: the host's CPU count (its recorded host info), the cores the local provider's machines share. */
async function runStrategy(host: BenchHost, options: BenchOptions, strategy: Strategy, run: number, cal: Calibration, snapshot: SnapshotSource | undefined, active: Set<ControlPlane>, cores: number): Promise<StrategyRun> {
  const name = `bench-${String(run)}-${strategy}`;
  const modeFields = MODE_FIELDS[strategy];
  const scaleUp = options.preloadBytes !== undefined && snapshot === undefined;
  const spec: SpecFields = { name, ...modeFields, replicas: scaleUp ? 1 : options.replicas, provisioningDelay: options.provisioningDelay, ...(options.version === undefined ? {} : { version: options.version }), ...(options.kubernetes === undefined ? {} : { kubernetes: options.kubernetes }) };
  let manifest = await host.manifest(spec);
  active.add(manifest);
  const provider = host.provider(manifest);
  const admin = ownClient(host, manifest);
  const watcher = new PromotionWatcher(admin, async () => (await provider.machineFacts(name)).map((m) => m.clientURL));
  watcher.start();
  const components =
    options.kubernetes === undefined
      ? undefined
      : new ComponentWatcher(
          name,
          provider.kubernetes,
          async () => (await provider.machineFacts(name)).map((m) => m.name),
          (machine) => host.componentPids(name, machine),
        );
  components?.start();
  const bytesBefore = host.linkBytes();
  try {
    // Method restore: the whole bring-up is timed, every machine provisioned at once (serial: in turn)
    // and the first one ready restoring the keyspace the others then catch up.
    if (snapshot !== undefined) await host.restore(manifest, snapshot);
    const up = await host.reconcile(manifest, options.timeoutMs);
    mustConverge(up, `${strategy} run ${String(run)}`);
    let last = up;
    let stages: StrategyRun['stages'];
    if (scaleUp && options.preloadBytes !== undefined) {
      // Method: one member first, the keys written into it, then the scale-up to N, so that every
      // learner has to catch up `preload` bytes, as a snapshot once the writes pass the provider's
      // snapshot count (see VALUE_BYTES). The write time is not counted.
      const endpoints = (await provider.machineFacts(name)).map((m) => m.clientURL);
      const writeStart = Date.now();
      const tls = provider.clientTls(name);
      const keys = await preloadKeys(endpoints, options.preloadBytes, tls === undefined ? undefined : readTlsCredentials(tls));
      const preloadMs = Date.now() - writeStart;
      const dbSize = await admin.status(endpoints[0] ?? '').then(
        (status) => status.dbSize,
        () => null,
      );
      manifest = await host.manifest({ ...spec, replicas: options.replicas });
      last = await host.reconcile(manifest, options.timeoutMs);
      mustConverge(last, `${strategy} run ${String(run)} (scale-up after the preload)`);
      stages = { upSeconds: seconds(up.settledAt - up.startedAt), preloadSeconds: seconds(preloadMs), preloadKeys: keys, dbSizeBytes: dbSize, scaleSeconds: seconds(last.settledAt - last.startedAt) };
    }
    const watched = await watcher.stop();
    const watchedComponents = await components?.stop();
    const { machines, events } = await host.records(name);
    const facts = new Map<string, MachineFacts>((await provider.machineFacts(name)).map((m) => [m.name, m]));
    const evidence: RunEvidence = {
      strategy,
      cluster: name,
      t0: up.startedAt,
      elapsedMs: up.settledAt - up.startedAt + (last === up ? 0 : last.settledAt - last.startedAt),
      passes: up.passes + (last === up ? 0 : last.passes),
      machines,
      events,
      facts,
      watched,
      logs: new Map(machines.map((m) => [m.name, host.memberLog(name, m.name)])),
      scaleFrom: last === up ? null : { t0: last.startedAt, existingVoters: 1 },
      restored: snapshot !== undefined,
      ...(stages === undefined ? {} : { stages }),
      linkBytes: bytesSince(bytesBefore, host.linkBytes(), facts),
      loadAverage: loadAverage(),
      cores,
      ...(watchedComponents === undefined ? {} : { components: watchedComponents }),
    };
    return summarizeRun(evidence, cal);
  } finally {
    await watcher.stop();
    await components?.stop();
    await admin.close();
    await host.destroy(manifest);
    active.delete(manifest);
  }
}

/** What each host sent and received between two readings, with the run's machines on it; hosts that moved nothing are left out. */
function bytesSince(before: Map<string, LinkBytes> | null, after: Map<string, LinkBytes> | null, facts: Map<string, MachineFacts>): StrategyRun['linkBytes'] {
  if (before === null || after === null) return null;
  const moved: NonNullable<StrategyRun['linkBytes']> = {};
  for (const [address, now] of after) {
    const then = before.get(address) ?? { sent: 0, received: 0 };
    const machines = [...facts.values()].filter((m) => new URL(m.clientURL).hostname === address).map((m) => m.name);
    const delta = { sent: now.sent - then.sent, received: now.received - then.received, machines };
    if (delta.sent > 0 || delta.received > 0) moved[address] = delta;
  }
  return moved;
}

const runsOf = (runs: BenchRun[], strategy: Strategy): StrategyRun[] => runs.flatMap((r) => r[strategy] ?? []);

function latencies(runs: BenchRun[], strategy: Strategy): number[] {
  return runsOf(runs, strategy).flatMap((s) => s.machines.flatMap((m) => (m.promotionLatencySeconds === null ? [] : [m.promotionLatencySeconds])));
}

const medianOf = (values: number[]): number | null => medianSeconds(values) ?? null;
const maxOf = (values: number[]): number | null => (values.length === 0 ? null : Math.max(...values));

export function modeFigures(runs: BenchRun[], strategy: Strategy): ModeFigures | undefined {
  const mine = runsOf(runs, strategy);
  if (mine.length === 0) return undefined;
  const secondsMedian = medianSeconds(mine.map((s) => s.seconds)) ?? 0;
  const boundMedian = medianSeconds(mine.map((s) => s.boundSeconds)) ?? 0;
  const serial = medianOf(runsOf(runs, 'serial').map((s) => s.seconds));
  const oneAtATime = runsOf(runs, 'parallel');
  const joinPhases = (of: StrategyRun[]): number | null => medianOf(of.flatMap((s) => (s.joinPhaseSeconds === null ? [] : [s.joinPhaseSeconds])));
  const joinPhase = joinPhases(mine);
  const oneJoinPhase = joinPhases(oneAtATime);
  const all = latencies(runs, strategy);
  return {
    seconds: secondsMedian,
    boundSeconds: boundMedian,
    efficiency: ratio(boundMedian, secondsMedian),
    speedup: serial === null ? null : ratio(serial, secondsMedian),
    joinPhaseSeconds: joinPhase,
    overOneAtATime:
      oneAtATime.length === 0
        ? null
        : { speedup: ratio(medianOf(oneAtATime.map((s) => s.seconds)) ?? 0, secondsMedian), joinPhaseSpeedup: joinPhase === null || oneJoinPhase === null ? null : ratio(oneJoinPhase, joinPhase) },
    refusals: medianOf(mine.map((s) => s.refusals)) ?? 0,
    promotionLatency: { medianSeconds: medianOf(all), maxSeconds: maxOf(all) },
  };
}

/** The headline fields (today's top-level JSON): serial against parallel; guarded is under `modes`. */
export function figures(modes: BenchResult['modes']): BenchFigures {
  const { serial, parallel } = modes;
  return {
    serialSeconds: serial?.seconds ?? null,
    parallelSeconds: parallel?.seconds ?? null,
    boundSeconds: parallel?.boundSeconds ?? null,
    speedup: parallel?.speedup ?? null,
    efficiency: parallel?.efficiency ?? null,
    promotionLatencySeconds: { serial: serial?.promotionLatency.medianSeconds ?? null, parallel: parallel?.promotionLatency.medianSeconds ?? null },
  };
}

/**
 * Calibrates, then runs `options.runs` serial/parallel pairs; `active` holds the control planes up at
 * any moment, for a signal handler to tear down.
 */
export async function runBench(host: BenchHost, options: BenchOptions, active: Set<ControlPlane>, progress: (line: string) => void): Promise<BenchResult> {
  const startedAt = new Date();
  const host0 = hostInfo();
  // The spec every run uses, checked (and its etcd binary found) before any machine exists.
  const version = (
    await host.manifest({ name: 'bench', replicas: options.replicas, provisioningDelay: options.provisioningDelay, ...(options.version === undefined ? {} : { version: options.version }), ...(options.kubernetes === undefined ? {} : { kubernetes: options.kubernetes }) })
  ).spec.version;
  if (compareVersions(version, '3.6.0') < 0 && options.modes.some((m) => MODE_FIELDS[m].maxLearners === 'auto')) {
    throw new InvalidInputError([`--modes: learners and guarded-learners need etcd 3.6 or later (--max-learners), got version ${version}`]);
  }
  progress(
    `calibrating init and join on etcd ${version}${options.kubernetes === undefined ? '' : `, and the start of Kubernetes ${options.kubernetes}'s components on a voter`}${options.preloadBytes === undefined ? '' : `, and a join with the ${String(options.preloadBytes)}-byte keyspace to catch up`}${options.method === 'restore' ? ', and a start restoring its snapshot' : ''}`,
  );
  let snapshot: SnapshotSource | undefined;
  const saveSnapshot =
    options.method === 'restore'
      ? (saved: SnapshotSource) => {
          snapshot = saved;
        }
      : undefined;
  if (options.calibration !== undefined && options.preloadBytes !== undefined) throw new InvalidInputError(['a given calibration is for benches without a keyspace']);
  const cal = options.calibration ?? (await calibration(host, version, options.kubernetes, options.preloadBytes, options.replicas - 1, saveSnapshot));
  if (options.method === 'restore' && snapshot === undefined) throw new Error('the calibration saved no keyspace snapshot for the restore method');
  const runs: BenchRun[] = [];
  for (let run = 1; run <= options.runs; run++) {
    // Alternate which strategy goes first, so a warm page cache or a drifting host favours neither.
    const order = run % 2 === 1 ? [...options.modes] : [...options.modes].reverse();
    const done: BenchRun = { run, order, speedup: null, efficiency: null };
    for (const strategy of order) {
      progress(`run ${String(run)}/${String(options.runs)}, ${strategy}`);
      done[strategy] = await runStrategy(host, options, strategy, run, cal, snapshot, active, host0.cpus);
    }
    if (done.serial && done.parallel) done.speedup = ratio(done.serial.seconds, done.parallel.seconds);
    done.efficiency = done.parallel?.efficiency ?? null;
    runs.push(done);
  }
  const modes: BenchResult['modes'] = {};
  for (const strategy of options.modes) {
    const figuresOf = modeFigures(runs, strategy);
    if (figuresOf) modes[strategy] = figuresOf;
  }
  const headline = figures(modes);
  const everyRun = options.modes.flatMap((strategy) => runsOf(runs, strategy));
  const joined = everyRun.flatMap((s) => s.machines.filter((m) => m.catchUpSeconds !== null));
  return {
    kind: 'fastplane-bench',
    ...headline,
    startedAt: startedAt.toISOString(),
    finishedAt: new Date().toISOString(),
    host: host0,
    settings: { replicas: options.replicas, provisioningDelay: options.provisioningDelay, version, runs: options.runs, preloadBytes: options.preloadBytes ?? null, method: options.method, modes: options.modes, hostBandwidth: options.hostBandwidth ?? null, linkLimit: options.hostBandwidth === undefined ? null : options.linkLimit, kubernetes: options.kubernetes ?? null },
    medians: headline,
    modes,
    calibration: cal,
    modelErrors: everyRun.filter((s) => s.modelError).length,
    preload: options.preloadBytes === undefined ? null : await summarizePreload(options.preloadBytes, joined),
    runs,
  };
}

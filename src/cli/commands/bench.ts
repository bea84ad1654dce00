import { readFileSync, rmSync } from 'node:fs';
import { validateControlPlane, type ControlPlane } from '../../api/control-plane.ts';
import { parseDurationRange } from '../../api/duration.ts';
import { InvalidInputError } from '../../api/errors.ts';
import type { BenchResult, Strategy, StrategyRun } from '../../bench/result.ts';
import type { Calibration } from '../../bench/calibration.ts';
import { saveBenchResult } from '../../bench/result.ts';
import { BenchRunFailed, runBench, type BenchHost, type BenchOptions } from '../../bench/runner.ts';
import { prepareWorkDir, stopOnSignal } from '../../bench/work-dir.ts';
import { BenchLab, benchLabNumber, isTcRate, UNLIMITED, type LinkLimit } from '../../bench/bench-lab.ts';
import { memberLog } from '../../bench/etcd-log.ts';
import { localComponentPids } from '../../bench/process-memory.ts';
import { NetLabError } from '../../bench/network-lab.ts';
import { startRestore } from '../../app/restore.ts';
import { destroyUnderLease } from '../../app/teardown.ts';
import { OUTCOME_EXIT, reconcileWithProgress } from '../reconcile.ts';
import { parseTimeout, resolveManifest } from '../spec-flags.ts';
import { EXIT } from '../exit-codes.ts';
import { CliContext } from '../context.ts';
import { renderTable } from '../table.ts';

/**
 * `fastplane bench`: its flags, its wiring to a private CliContext, and its table. The bench itself
 * (calibration, runs, bound, watcher) is src/bench/. Every run lives in a private state dir under
 * `<state dir>/bench/`, so the user's clusters and records are never touched; the result is saved as
 * `<state dir>/bench/latest.json` for `fastplane report`.
 */

export interface BenchFlags {
  replicas: string;
  provisioningDelay: string;
  /** The keyspace written before the joins; `--preload` is its older name. */
  keyspace?: string;
  preload?: string;
  runs: string;
  version?: string;
  modes: string;
  timeout: string;
  output: string;
  /** Run on the network lab, each host's link limited to this tc rate (both directions). */
  hostBandwidth?: string;
  /** Limit only what each host receives (the older, asymmetric lab). */
  asymmetricLab?: boolean;
  /** Every combination of the comma-separated --host-bandwidth, --keyspace and --provisioning-delay values, a bench each. */
  sweep?: boolean;
  /** With --sweep: the folder of a sweep cut short, to go on with. */
  resume?: string;
  /** How the keyspace gets into the first member: scale-up (default) or restore. */
  method?: string;
  /** Every machine runs the Kubernetes control plane of this version (validated as `up --kubernetes`). */
  kubernetes?: string;
}

const STRATEGIES: readonly Strategy[] = ['serial', 'parallel', 'guarded', 'learners', 'guarded-learners'];

/** `serial,parallel,guarded,learners,guarded-learners` or any of them, in the order given, each once. */
function parseModes(text: string, problems: string[]): Strategy[] {
  const modes: Strategy[] = [];
  for (const mode of text.split(',').map((m) => m.trim())) {
    const strategy = STRATEGIES.find((s) => s === mode);
    if (strategy === undefined) {
      problems.push(`--modes: must be serial, parallel, guarded, learners and/or guarded-learners, comma-separated, got ${text}`);
      return modes;
    }
    if (!modes.includes(strategy)) modes.push(strategy);
  }
  return modes;
}

const MAX_PRELOAD_BYTES = 1024 ** 3;
const SIZE = /^(\d+(?:\.\d+)?)\s*(b|kb|kib|mb|mib|gb|gib)?$/i;
const SIZE_UNITS: Record<string, number> = { b: 1, kb: 1e3, kib: 1024, mb: 1e6, mib: 1024 ** 2, gb: 1e9, gib: 1024 ** 3 };

/** `100MB` (decimal units), `64MiB` (binary units) or a plain byte count; undefined when not a size. */
export function parseSize(text: string): number | undefined {
  const match = SIZE.exec(text.trim());
  if (!match) return undefined;
  const factor = SIZE_UNITS[(match[2] ?? 'b').toLowerCase()];
  return factor === undefined ? undefined : Math.round(Number(match[1]) * factor);
}

/** Every flag checked before anything is created; each message names its flag (exit 2). */
export function parseBenchFlags(flags: BenchFlags): BenchOptions & { output: 'json' | 'table' } {
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
  const keyspace = flags.keyspace ?? flags.preload;
  const keyspaceFlag = flags.keyspace === undefined ? '--preload' : '--keyspace';
  if (flags.keyspace !== undefined && flags.preload !== undefined) problems.push('--keyspace and --preload are the same setting: give one');
  if (keyspace !== undefined) {
    preloadBytes = parseSize(keyspace);
    if (preloadBytes === undefined || preloadBytes <= 0 || preloadBytes > MAX_PRELOAD_BYTES) {
      problems.push(`${keyspaceFlag}: must be a size from 1B to 1GiB such as 256MiB or 100MB, got ${keyspace}`);
    }
  }
  const modes = parseModes(flags.modes, problems);
  if (flags.hostBandwidth !== undefined && flags.hostBandwidth !== UNLIMITED && !isTcRate(flags.hostBandwidth)) {
    problems.push(`--host-bandwidth: must be a rate such as 100mbit (bit, kbit, mbit or gbit) or ${UNLIMITED}, got ${flags.hostBandwidth}`);
  }
  if (flags.asymmetricLab === true && flags.hostBandwidth === undefined) problems.push('--asymmetric-lab: only with --host-bandwidth');
  if (flags.resume !== undefined && flags.sweep !== true) problems.push('--resume: only with --sweep');
  const method = flags.method ?? 'scale-up';
  if (method !== 'scale-up' && method !== 'restore') problems.push(`--method: must be scale-up or restore, got ${method}`);
  else if (method === 'restore' && keyspace === undefined) problems.push('--method restore: give --keyspace, the keyspace the bring-up restores');
  // The components run on the local provider only, and a keyspace's catch-up is timed without them.
  if (flags.kubernetes !== undefined && flags.hostBandwidth !== undefined) problems.push('--kubernetes: not with --host-bandwidth (the network lab\'s ssh provider runs no Kubernetes components)');
  if (flags.kubernetes !== undefined && keyspace !== undefined) problems.push(`--kubernetes: not with ${keyspaceFlag} (the calibration times a keyspace's catch-up without the components)`);
  if (flags.output !== 'json' && flags.output !== 'table') problems.push(`-o: must be json or table, got ${flags.output}`);
  let timeoutMs = 0;
  try {
    timeoutMs = parseTimeout(flags.timeout);
  } catch (error) {
    if (!(error instanceof InvalidInputError)) throw error;
    problems.push(...error.problems);
  }
  if (problems.length > 0) throw new InvalidInputError(problems);
  return { replicas, provisioningDelay: flags.provisioningDelay, preloadBytes, runs, version: flags.version, timeoutMs, modes, hostBandwidth: flags.hostBandwidth, linkLimit: flags.hostBandwidth === UNLIMITED ? 'none' : flags.asymmetricLab === true ? 'inbound-only' : 'both-directions', method: method === 'restore' ? 'restore' : 'scale-up', kubernetes: flags.kubernetes, output: flags.output === 'json' ? 'json' : 'table' };
}

/**
 * The bench's view of a CliContext: the one place bench touches the state store. On a lab, every
 * spec gets the lab's hosts as its ssh provider.
 */
function hostOf(ctx: CliContext, lab: BenchLab | undefined): BenchHost {
  return {
    stateDir: ctx.stateDir,
    manifest: async ({ maxLearners, ...fields }) => {
      const manifest = await resolveManifest(ctx, { ...fields, replicas: String(fields.replicas), ...(maxLearners === undefined ? {} : { maxLearners: String(maxLearners) }) });
      return lab === undefined ? manifest : validateControlPlane({ ...manifest, spec: { ...manifest.spec, provider: { ...manifest.spec.provider, ...lab.providerFields() } } });
    },
    reconcile: (manifest, timeoutMs) => reconcileWithProgress(ctx, manifest, timeoutMs),
    // Its own cluster: the lease is taken at once, even from a run interrupted by a signal.
    destroy: async (manifest) => {
      await destroyUnderLease(ctx, manifest, { waitMs: 0, force: true });
    },
    records: async (cluster) => ({ machines: await ctx.store.listMachines(cluster), events: await ctx.store.listEvents(cluster) }),
    provider: (manifest) => ctx.provider(manifest),
    memberLog: (cluster, machine) => (lab === undefined ? memberLog(ctx.stateDir, cluster, machine) : lab.memberLog(cluster, machine)),
    // Every run is a new control plane: nothing is ever replaced, so nothing is backed up or deleted.
    restore: async (manifest, snapshot) => {
      const started = await startRestore(ctx, manifest, { source: snapshot }, false, () => undefined);
      if (!started.ok) throw new Error(`bench: restore of ${manifest.metadata.name} not recorded: ${'blocked' in started ? started.blocked : started.backupFailed.message}`);
    },
    linkBytes: () => lab?.linkBytes() ?? null,
    componentPids: (cluster, machine) => (lab === undefined ? localComponentPids(ctx.stateDir, cluster, machine) : {}),
  };
}

/** How the lab limits each host's link; an asymmetric lab is named as such wherever it is used. */
function labLink(rate: string, limit: LinkLimit | null | undefined): string {
  if (limit === 'none' || rate === UNLIMITED) return "each host's link unlimited (the lab's veths and bridge only)";
  return limit === 'both-directions' ? `each host's link ${rate} each way` : `ASYMMETRIC LAB: only what each host receives limited, to ${rate}`;
}

/** Every run that got ahead of its bound, at the end or at a milestone, and where. */
function modelErrorText(result: BenchResult): string {
  const runs = result.runs.flatMap((r) => result.settings.modes.flatMap((mode) => (r[mode]?.modelError === true ? [r[mode]] : [])));
  const where = runs.map((s) => `${s.cluster}: ${s.boundSeconds > s.seconds ? `done in ${fmt(s.seconds)} s, bound ${fmt(s.boundSeconds)} s; ` : ''}${s.milestonesAhead.map((m) => `${m.milestone} at ${fmt(m.observedSeconds, 3)} s, bound ${fmt(m.boundSeconds, 3)} s`).join('; ')}`);
  return `MODEL ERROR: ${String(result.modelErrors)} run(s) got ahead of their bound: the bound's model or calibration is wrong (${where.join(' | ')})`;
}

const fmt = (n: number | null, digits = 2): string => (n === null ? '-' : n.toFixed(digits));

const MIB = 1024 ** 2;
const mib = (bytes: number | undefined): string => (bytes === undefined ? '-' : (bytes / MIB).toFixed(0));

function machineTable(run: StrategyRun): string {
  const kubernetes = run.memory !== undefined;
  const head = ['MACHINE', 'ROLE', 'READY', 'PROVISIONING', 'AT GATE', 'JOIN', 'PROMOTION LATENCY', ...(kubernetes ? ['APISERVER START', 'READY', 'ALL READY', 'RSS MiB etcd/apiserver/cm/sched'] : [])];
  const rows = run.machines.map((m) => {
    const c = m.components;
    const rss = m.peakRssBytes ?? {};
    const components = kubernetes
      ? [fmt(c?.apiserverStartSeconds ?? null), fmt(c?.apiserverReadySeconds ?? null), fmt(c?.controllersReadySeconds ?? null), [rss.etcd, rss['kube-apiserver'], rss['kube-controller-manager'], rss['kube-scheduler']].map(mib).join('/')]
      : [];
    return [m.name, m.role ?? '-', fmt(m.readySeconds), fmt(m.provisioningSeconds), fmt(m.gateSeconds), fmt(m.joinSeconds), fmt(m.promotionLatencySeconds, 3), ...components];
  });
  return renderTable([head, ...rows], { right: Array.from({ length: head.length - 2 }, (_, i) => i + 2) });
}

function renderResult(result: BenchResult): string {
  const s = result.settings;
  const c = result.calibration;
  const modeRows = Object.entries(result.modes).map(([mode, m]) => [mode, fmt(m.seconds), fmt(m.boundSeconds), fmt(m.efficiency, 3), fmt(m.speedup), String(m.refusals), fmt(m.promotionLatency.medianSeconds, 3), fmt(m.promotionLatency.maxSeconds, 3)]);
  const runRows = result.runs.map((r) => [String(r.run), r.order.join(','), ...s.modes.flatMap((mode) => [fmt(r[mode]?.seconds ?? null), fmt(r[mode]?.boundSeconds ?? null)]), fmt(r.speedup), fmt(r.efficiency, 3)]);
  const runColumns = s.modes.flatMap((mode) => [`${mode.toUpperCase()} s`, 'BOUND s']);
  const lines = [
    `fastplane bench: ${String(s.replicas)} replicas, provisioning ${s.provisioningDelay}, etcd ${s.version}${s.kubernetes == null ? '' : `, Kubernetes ${s.kubernetes}`}, ${String(s.runs)} run(s)${s.preloadBytes === null ? '' : `, keyspace ${String(s.preloadBytes)} bytes${s.method === 'restore' ? ' restored by the first member' : ''}`}${s.hostBandwidth == null ? ', loopback' : `, network lab, ${labLink(s.hostBandwidth, s.linkLimit)}`}`,
    `host: ${String(result.host.cpus)} x ${result.host.cpuModel}, ${String(result.host.memoryGiB)} GiB, ${result.host.os}, node ${result.host.node}, load ${result.host.loadAverage.join(' ')}`,
    `calibration (fastest of ${String(c.initSamplesSeconds.length)}): init ${fmt(c.initSeconds, 3)} s${c.restoreSeconds == null ? '' : ` (${fmt(c.restoreSeconds, 3)} s restoring the keyspace)`}, join ${fmt(c.joinSeconds, 3)} s${c.catchUpSeconds === null ? '' : `, join with the keyspace to catch up ${fmt(c.catchUpSeconds, 3)} s`}${c.leaderOutbound == null ? '' : `, leader sends ${fmt(c.leaderOutbound.bytesPerSecond / 1e6, 1)} MB/s to ${String(c.leaderOutbound.streams)} readers`}; add rule ${c.addRule}${c.kubernetes === undefined ? '' : `; Kubernetes ${c.kubernetes.version}: apiserver start to /readyz ${fmt(c.kubernetes.apiserverSeconds, 3)} s, controller-manager and scheduler ${fmt(c.kubernetes.controllersSeconds, 3)} s`}`,
    '',
    renderTable([['MODE', 'SECONDS', 'BOUND s', 'EFFICIENCY', 'SPEEDUP', 'REFUSALS', 'PROMOTION MEDIAN s', 'MAX s'], ...modeRows], { right: [1, 2, 3, 4, 5, 6, 7] }),
    '',
    renderTable([['RUN', 'ORDER', ...runColumns, 'SPEEDUP', 'EFFICIENCY'], ...runRows], { right: Array.from({ length: runColumns.length + 2 }, (_, i) => i + 2) }),
    'medians over runs; promotion latency = learner caught up to listed as a voter, seen from outside',
  ];
  if (result.modelErrors > 0) lines.push(modelErrorText(result));
  if (result.preload) {
    const p = result.preload;
    lines.push(
      `preload ${String(p.bytes)} bytes; learners sent a snapshot ${p.learnersSentSnapshot}, median ${String(p.snapshotBytes)} bytes; loopback copy of those bytes ${fmt(p.loopbackCopySeconds)} s`,
      `  learner catch-up to promotion (median) ${fmt(p.catchUpSeconds)} s (x${fmt(p.catchUpOverCopy)} the copy); to snapshot applied ${fmt(p.dataCatchUpSeconds)} s (x${fmt(p.dataCatchUpOverCopy)}); snapshot transfer ${fmt(p.snapshotReceiveSeconds)} s (x${fmt(p.receiveOverCopy)})`,
      `  first publish timed out (etcd's 7 s request timeout, the snapshot held the publish entry): ${p.publishTimeouts} learners`,
    );
  }
  for (const strategy of s.modes) {
    const run = result.runs[0]?.[strategy];
    if (run) {
      lines.push('', `run 1, ${strategy} (seconds from the start; ready = the provider's own ready time; join = AddLearner sent to PromoteLearner done):`, machineTable(run));
      if (run.memory) lines.push(`control plane peak RSS ${mib(run.memory.controlPlanePeakRssBytes)} MiB (every member and component summed, ${String(run.memory.samples)} samples every ${String(run.memory.intervalMs)} ms)`);
    }
  }
  return lines.join('\n');
}

/** One bench on its own work dir (and lab): its result, or the exit code of a run that did not converge. */
export async function benchOnce(ctx: CliContext, options: BenchOptions): Promise<BenchResult | number> {
  const workDir = prepareWorkDir(ctx.stateDir);
  let lab: BenchLab | undefined;
  if (options.hostBandwidth !== undefined) {
    process.stderr.write(`bench: network lab ${String(benchLabNumber())}: ${String(BenchLab.hostsFor(options.replicas))} hosts, ${labLink(options.hostBandwidth, options.linkLimit)}\n`);
    try {
      lab = BenchLab.open(options.replicas, options.hostBandwidth, options.linkLimit);
    } catch (error) {
      rmSync(workDir, { recursive: true, force: true });
      if (error instanceof NetLabError) throw new InvalidInputError([`--host-bandwidth: the network lab could not be made: ${error.message}`]);
      throw error;
    }
  }
  const bench = new CliContext(workDir, ctx.log.level);
  const host = hostOf(bench, lab);
  const active = new Set<ControlPlane>();
  const restoreSignals = stopOnSignal(active, (manifest) => host.destroy(manifest), workDir, () => lab?.down());
  let keepWorkDir = false;
  try {
    return await runBench(host, options, active, (line) => process.stderr.write(`bench: ${line}\n`));
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
    try {
      lab?.down();
    } catch (error) {
      // The measurement is done: a lab that would not come down is reported, not a reason to lose it.
      process.stderr.write(`warning: bench: the network lab was not removed (${error instanceof Error ? error.message : String(error)}); run scripts/netlab.sh down with FPL_LAB=${String(lab?.info.lab)}\n`);
    }
    if (!keepWorkDir) rmSync(workDir, { recursive: true, force: true });
  }
}

/** Tests only (FASTPLANE_BENCH_CALIBRATION): the calibration to take instead of measuring one. */
export function givenCalibration(ctx: CliContext): { calibration?: Calibration } {
  const file = ctx.hooks.benchCalibrationFile;
  return file === undefined ? {} : { calibration: JSON.parse(readFileSync(file, 'utf8')) as Calibration };
}

/** A run ahead of its bound makes every figure measured against that bound suspect: say so, and fail. */
export function failOnModelError(result: BenchResult): number {
  if (result.modelErrors === 0) return EXIT.converged;
  process.stderr.write(`error: bench: ${modelErrorText(result)}\n`);
  return EXIT.internal;
}

export async function benchCommand(ctx: CliContext, flags: BenchFlags): Promise<number> {
  const options = { ...parseBenchFlags(flags), ...givenCalibration(ctx) };
  const result = await benchOnce(ctx, options);
  if (typeof result === 'number') return result;
  const path = saveBenchResult(ctx.stateDir, result);
  process.stdout.write(`${options.output === 'json' ? JSON.stringify(result, null, 2) : renderResult(result)}\n`);
  process.stderr.write(`bench: result saved to ${path}\n`);
  return failOnModelError(result);
}

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { MachinePhase } from '../domain/machine.ts';
import type { LinkLimit } from './bench-lab.ts';
import type { Bound, BoundInputs } from './critical-path-bound.ts';
import type { Calibration } from './calibration.ts';
import type { LearnerSnapshot } from './etcd-log.ts';
import type { HostInfo } from './host-info.ts';
import type { MilestoneAhead } from './milestones.ts';
import type { LinkBytes } from './network-lab.ts';
import type { MachineComponentTimes } from './component-metrics.ts';
import type { ComponentKind } from '../ports/machine-provider.ts';

/**
 * How a keyspace gets into the first member: `scale-up` writes it into a 1-member cluster, then
 * scales to N (the writes not counted); `restore` brings all N up from its snapshot, as `restore` does.
 */
export type BenchMethod = 'scale-up' | 'restore';

/** The JSON `fastplane bench` prints and saves, read back by `fastplane report`. */

/**
 * A bench mode: `serial` (KCP's order), `parallel` (etcd guards each change, its 5 s rule included),
 * `guarded` (parallel with `reconfigurationCheck: fastplane`: the planner checks, etcd's rule is off).
 */
/**
 * serial: Cluster API KCP's order. parallel: every machine at once, one learner at a time. guarded:
 * parallel with fastplane's checks in place of etcd's add rule. learners and guarded-learners: the
 * same with etcd 3.6's parallel learners (maxLearners auto).
 */
export type Strategy = 'serial' | 'parallel' | 'guarded' | 'learners' | 'guarded-learners';

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
  /** When the provider made the machine ready (its own readyAt), seconds from the start of the run: the bound's input. */
  readySeconds: number | null;
  /** Record created (Pending) to first seen Provisioned, as fastplane observed it. */
  provisioningSeconds: number | null;
  /** First seen Provisioned to the start of its own InitCluster or successful AddLearner: waiting at the gate. */
  gateSeconds: number | null;
  /** Successful AddLearner sent to PromoteLearner succeeded: what one join holds the membership gate. */
  joinSeconds: number | null;
  /** From the independent watcher: learner first caught up (applied within 10 of the leader) to first listed as a voter. */
  promotionLatencySeconds: number | null;
  /** Learner process started (AddLearner done) to PromoteLearner succeeded: start-up plus catch-up. */
  catchUpSeconds: number | null;
  /** Whether its etcd log shows a database snapshot received from the leader (null: no log to read). */
  receivedSnapshot: boolean | null;
  /** How the received snapshot went, from the member's own log; null without one. */
  snapshot: LearnerSnapshot | null;
  /** With the Kubernetes control plane: its components' starts and first healthy answers (absent on etcd-only benches). */
  components?: MachineComponentTimes;
  /** With the Kubernetes control plane: peak resident memory (VmRSS) per process of the machine, etcd included, in bytes. */
  peakRssBytes?: Partial<Record<ComponentKind, number>>;
}

/** With --preload: learner catch-up against copying the same bytes over a loopback TCP socket. */
export interface PreloadSummary {
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
}

export interface LatencySummary {
  medianSeconds: number | null;
  maxSeconds: number | null;
}

export interface StrategyRun {
  strategy: Strategy;
  cluster: string;
  /** Seconds from applying the spec to the pass that saw every voter healthy (preload excluded). */
  seconds: number;
  /** The lower bound for this run's provider ready times: its critical path, or with --kubernetes the host's shared CPU when later (see critical-path-bound.ts). */
  boundSeconds: number;
  /** bound / seconds, never clipped. */
  efficiency: number;
  /** The run beat its bound, at the end or at a milestone: the model (or its calibration) is wrong, not the run fast. */
  modelError: boolean;
  /** The milestones (init serving, each catch-up, each promotion) at which the run was ahead of its bound. */
  milestonesAhead: MilestoneAhead[];
  /** With a lab: what each host sent and received over its link during the run, by address, with the run's machines on it. */
  linkBytes: Record<string, LinkBytes & { machines: string[] }> | null;
  /** The host's load average (1, 5, 15 min, as `uptime`) when the run ended: the lab's CPU is shared. */
  loadAverage: number[];
  bound: { inputs: BoundInputs } & Bound;
  /** Caught up to listed as a voter, from the watcher, over this run's joins. */
  promotionLatency: LatencySummary;
  /** With --preload: the 1-member bring-up, the key writes and the scale-up, each timed alone. */
  stages?: { upSeconds: number; preloadSeconds: number; preloadKeys: number; dbSizeBytes: number | null; scaleSeconds: number };
  passes: number;
  /** Refused membership attempts (etcd's 5 s rule, learner not yet in sync), retried by the next pass. */
  refusals: number;
  machines: BenchMachine[];
  /** First AddLearner sent to last PromoteLearner done; null without joins. */
  joinPhaseSeconds: number | null;
  membership: BenchEvent[];
  /**
   * With the Kubernetes control plane: the peak, over the samples, of the resident memory (VmRSS of
   * /proc/PID/status) of every recorded process of every machine summed (members and components; the
   * endpoint's HAProxy not counted), sampled every `intervalMs` during the run.
   */
  memory?: { controlPlanePeakRssBytes: number; samples: number; intervalMs: number };
}

export interface BenchRun {
  run: number;
  order: Strategy[];
  /** Each strategy the bench ran (`--modes`). */
  serial?: StrategyRun;
  parallel?: StrategyRun;
  guarded?: StrategyRun;
  learners?: StrategyRun;
  'guarded-learners'?: StrategyRun;
  /** serial / parallel; null unless both ran. */
  speedup: number | null;
  /** The parallel run's efficiency; null unless it ran. */
  efficiency: number | null;
}

/** The headline figures, medians over runs; null for a strategy `--modes` left out. */
export interface BenchFigures {
  serialSeconds: number | null;
  parallelSeconds: number | null;
  boundSeconds: number | null;
  speedup: number | null;
  /** Parallel bound / parallel seconds; above 1 is a model error (see modelErrors), never clipped. */
  efficiency: number | null;
  promotionLatencySeconds: { serial: number | null; parallel: number | null };
}

/** One strategy's figures, medians over runs. */
export interface ModeFigures {
  seconds: number;
  boundSeconds: number;
  /** boundSeconds / seconds, never clipped. */
  efficiency: number;
  /** Against serial; null when serial did not run. */
  speedup: number | null;
  /** Median join phase (first AddLearner to last PromoteLearner). */
  joinPhaseSeconds: number | null;
  /** Against `parallel` (one learner at a time): its seconds / these, and the same for the join phase; null when parallel did not run. */
  overOneAtATime: { speedup: number; joinPhaseSpeedup: number | null } | null;
  refusals: number;
  /** Over every join of every run of this strategy. */
  promotionLatency: LatencySummary;
}

export interface BenchResult extends BenchFigures {
  kind: 'fastplane-bench';
  startedAt: string;
  finishedAt: string;
  host: HostInfo;
  /**
   * `hostBandwidth`: each host's link on the network lab; null (or absent, in older results) on
   * loopback. `linkLimit`: which directions it limits (absent in older results: inbound only).
   */
  settings: { replicas: number; provisioningDelay: string; version: string; runs: number; preloadBytes: number | null; method?: BenchMethod; modes: Strategy[]; hostBandwidth?: string | null; linkLimit?: LinkLimit | null; kubernetes?: string | null };
  /** The headline figures above are these medians over runs. */
  medians: BenchFigures;
  /** Per strategy run (`--modes`), the same figures side by side. */
  modes: Partial<Record<Strategy, ModeFigures>>;
  /** Init and join costs measured on a throwaway cluster before the runs: the bound's inputs. */
  calibration: Calibration;
  /** Runs (of either strategy) that beat their bound. */
  modelErrors: number;
  preload: PreloadSummary | null;
  runs: BenchRun[];
}

/** Where `bench` saves its last result and `report` looks for it. */
export function benchResultPath(stateDir: string): string {
  return join(stateDir, 'bench', 'latest.json');
}

/** Saves the result as latest.json and a timestamped copy; returns the latest.json path. */
export function saveBenchResult(stateDir: string, result: BenchResult): string {
  const text = `${JSON.stringify(result, null, 2)}\n`;
  const path = benchResultPath(stateDir);
  mkdirSync(join(stateDir, 'bench'), { recursive: true });
  writeFileSync(join(stateDir, 'bench', `bench-${result.startedAt.replace(/[:.]/g, '-')}.json`), text);
  writeFileSync(path, text);
  return path;
}

/** The last bench result, or undefined when there is none (or it is not one: then say so). */
export function loadBenchResult(stateDir: string): BenchResult | undefined {
  const path = benchResultPath(stateDir);
  if (!existsSync(path)) return undefined;
  try {
    const parsed: unknown = JSON.parse(readFileSync(path, 'utf8'));
    if (typeof parsed === 'object' && parsed !== null && 'kind' in parsed && parsed.kind === 'fastplane-bench' && 'runs' in parsed && Array.isArray(parsed.runs)) {
      return parsed as BenchResult;
    }
  } catch {
    // Reported below, like any other unreadable file.
  }
  process.stderr.write(`warning: ${path} is not a fastplane bench result; the report leaves the comparison out\n`);
  return undefined;
}

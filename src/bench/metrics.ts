import type { EventRecord, MachinePhase, MachineRecord } from '../domain/machine.ts';
import type { MachineFacts } from '../ports/machine-provider.ts';
import { learnerLimitInForce } from '../domain/learner-limit.ts';
import { criticalPathBound, PEER_CONNECTED_SECONDS, type BoundInputs } from './critical-path-bound.ts';
import type { Calibration } from './calibration.ts';
import { learnerSnapshotFromLog, logShowsSnapshot } from './etcd-log.ts';
import { MEMBERSHIP_ACTIONS } from './membership.ts';
import { machineComponentTimes, machinePeakRss } from './component-metrics.ts';
import type { WatchedComponents } from './component-watcher.ts';
import { milestonesAhead, type ObservedMilestones } from './milestones.ts';
import { promotionLatencyMs, type WatchedJoin } from './promotion-watcher.ts';
import type { BenchMachine, Strategy, StrategyRun } from './result.ts';
import { medianAndMax, ratio, seconds } from './stats.ts';

/** Everything one strategy run left behind, read before its cluster is torn down. */
export interface RunEvidence {
  strategy: Strategy;
  cluster: string;
  /** Epoch ms the spec was applied: every figure is in seconds from here. */
  t0: number;
  elapsedMs: number;
  passes: number;
  machines: MachineRecord[];
  events: EventRecord[];
  /** The provider's own files, by machine name. */
  facts: Map<string, MachineFacts>;
  /** The outside watcher's view of each join, by peer URL. */
  watched: Map<string, WatchedJoin>;
  logs: Map<string, string | null>;
  /** With a preload, the scale-up starts from one serving member: the bound starts there too. */
  scaleFrom: { t0: number; existingVoters: number } | null;
  /** Brought up from the keyspace's snapshot: the first member restores it, every learner catches it up. */
  restored?: boolean;
  stages?: StrategyRun['stages'];
  linkBytes: StrategyRun['linkBytes'];
  loadAverage: number[];
  /** The host's CPU count: the cores its machines share where the calibration could weigh their CPU. */
  cores: number;
  /** With the Kubernetes control plane: what the component watcher saw. */
  components?: WatchedComponents;
}

/** Successful membership changes, oldest first. */
function membershipOf(events: EventRecord[]): EventRecord[] {
  return events.filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action) && e.outcome === 'Succeeded').sort((a, b) => a.at - b.at);
}

function machineMetrics(record: MachineRecord, changes: EventRecord[], evidence: RunEvidence): BenchMachine {
  const { t0 } = evidence;
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
  const { Pending: pending, Provisioned: provisioned } = record.phaseTimes;
  const admitted = mine.find((e) => e.action === 'InitCluster' || e.action === 'AddLearner');
  const log = evidence.logs.get(record.name) ?? null;
  const readyAt = evidence.facts.get(record.name)?.readyAt;
  const watched = record.peerURL === undefined ? undefined : evidence.watched.get(record.peerURL);
  const latencyMs = watched === undefined ? null : promotionLatencyMs(watched);
  return {
    name: record.name,
    role: record.role ?? null,
    phaseTimes,
    phaseDurations,
    readySeconds: readyAt === undefined ? null : seconds(readyAt - t0),
    provisioningSeconds: pending !== undefined && provisioned !== undefined ? seconds(provisioned - pending) : null,
    gateSeconds: admitted && provisioned !== undefined ? seconds(Math.max(0, admitted.at - provisioned)) : null,
    joinSeconds: add && promotedAt !== undefined ? seconds(promotedAt - add.at) : null,
    promotionLatencySeconds: latencyMs === null ? null : seconds(latencyMs),
    catchUpSeconds: add && promotedAt !== undefined ? seconds(promotedAt - (add.endedAt ?? add.at)) : null,
    receivedSnapshot: log === null ? null : logShowsSnapshot(log),
    snapshot: log !== null && add ? learnerSnapshotFromLog(log, add.endedAt ?? add.at) : null,
    ...(evidence.components === undefined
      ? {}
      : { components: machineComponentTimes(record.name, evidence.events, evidence.components, t0), peakRssBytes: machinePeakRss(record.name, evidence.components) }),
  };
}

/** Each machine's apiserver seen ready, on the bound's clock (`shift`: the bound's start after the run's, in seconds). */
function observedApiservers(machines: BenchMachine[], shift: number): NonNullable<ObservedMilestones['apiservers']> {
  return machines.flatMap((m) => {
    const c = m.components;
    if (c?.apiserverReadySeconds == null) return [];
    return [{ machine: m.name, readyAt: c.apiserverReadySeconds - shift, startToReadySeconds: c.apiserverStartSeconds === null ? null : seconds((c.apiserverReadySeconds - c.apiserverStartSeconds) * 1000) }];
  });
}

/**
 * The bound's Kubernetes terms: the calibrated starts, and the shared-CPU work where the calibration
 * weighed the machines' processes (they run on this host then, and share its cores).
 */
function kubernetesTerms(k: NonNullable<Calibration['kubernetes']>, cores: number): NonNullable<BoundInputs['kubernetes']> {
  const terms = { apiserverSeconds: k.apiserverSeconds, controllersSeconds: k.controllersSeconds };
  const apiserverCpuSeconds = k.apiserverCpuSeconds ?? null;
  const controllersCpuSeconds = k.controllersCpuSeconds ?? null;
  return apiserverCpuSeconds === null || controllersCpuSeconds === null ? terms : { ...terms, cpu: { cores, apiserverCpuSeconds, controllersCpuSeconds } };
}

/** First AddLearner sent to last PromoteLearner done: the phase parallel learners shorten; null without joins. */
function joinPhase(changes: EventRecord[]): number | null {
  const first = changes.find((e) => e.action === 'AddLearner');
  const last = changes.filter((e) => e.action === 'PromoteLearner').at(-1);
  return first === undefined || last === undefined ? null : seconds((last.endedAt ?? last.at) - first.at);
}

/** A strategy run's figures, its bound from the provider's ready times and the calibration. */
export function summarizeRun(evidence: RunEvidence, calibration: Calibration): StrategyRun {
  const records = [...evidence.machines].sort((a, b) => a.ordinal - b.ordinal);
  const changes = membershipOf(evidence.events);
  const machines = records.map((r) => machineMetrics(r, changes, evidence));
  const scale = evidence.scaleFrom;
  // With a preload, the bound covers the 1-member bring-up (its machine ready, then init) and the
  // scale-up from its own start: the writes in between are not counted in the run's time either.
  const initRecord = records.find((r) => r.role === 'init');
  const initReadyAt = initRecord === undefined ? undefined : evidence.facts.get(initRecord.name)?.readyAt;
  const upBound = scale === null || initReadyAt === undefined ? 0 : Math.max(0, initReadyAt - evidence.t0) / 1000 + calibration.initSeconds;
  const boundT0 = scale?.t0 ?? evidence.t0;
  const joining = scale === null ? records : records.filter((r) => r.role !== 'init');
  const withKeyspace = evidence.stages !== undefined || evidence.restored === true;
  // The components' terms apply to a run that brought them up (the calibration timed them for it).
  const kubernetes = evidence.components === undefined ? undefined : calibration.kubernetes;
  const inputs = {
    readySeconds: joining.flatMap((r) => {
      const readyAt = evidence.facts.get(r.name)?.readyAt;
      return readyAt === undefined ? [] : [seconds(Math.max(0, readyAt - boundT0))];
    }),
    // A restore's first member starts from the snapshot: the calibrated start that restored the same.
    initSeconds: evidence.restored === true && calibration.restoreSeconds !== null ? calibration.restoreSeconds : calibration.initSeconds,
    // With a keyspace every learner has it to catch up: the calibrated join that had the same.
    joinSeconds: withKeyspace && calibration.catchUpSeconds !== null ? calibration.catchUpSeconds : calibration.joinSeconds,
    // Guarded members run with etcd's check off: the "no add rule" bound, whatever the version.
    addRule: evidence.strategy === 'guarded' || evidence.strategy === 'guarded-learners' ? ('none' as const) : calibration.addRule,
    connectedSeconds: PEER_CONNECTED_SECONDS,
    existingVoters: scale?.existingVoters ?? 0,
    // What the members ran (--max-learners recorded at each start), not what the mode asked for.
    learnerLimit: records.length === 0 ? 1 : learnerLimitInForce(Number.POSITIVE_INFINITY, records),
    ...(withKeyspace && calibration.leaderOutbound !== null
      ? { leaderSend: { bytesPerLearner: calibration.leaderOutbound.bytesPerStream, bytesPerSecond: calibration.leaderOutbound.bytesPerSecond } }
      : {}),
    ...(kubernetes === undefined ? {} : { kubernetes: kubernetesTerms(kubernetes, evidence.cores) }),
  };
  const bound = criticalPathBound(inputs);
  const boundSeconds = seconds((upBound + bound.seconds) * 1000);
  const runSeconds = seconds(evidence.elapsedMs);
  // The run's own moments on the bound's clock.
  const onBoundClock = (at: number): number => (at - boundT0) / 1000;
  const firstAdd = changes.find((e) => e.action === 'AddLearner');
  const initVoterAt = initRecord?.phaseTimes.Voter;
  const servingAt = [initVoterAt, firstAdd === undefined ? undefined : (firstAdd.endedAt ?? firstAdd.at)].filter((t): t is number => t !== undefined);
  const ahead = milestonesAhead(bound, inputs.joinSeconds, {
    initServingAt: servingAt.length === 0 ? null : onBoundClock(Math.min(...servingAt)),
    promotedAt: changes.filter((e) => e.action === 'PromoteLearner').map((e) => onBoundClock(e.endedAt ?? e.at)),
    catchUps: machines.flatMap((m) => (m.joinSeconds === null ? [] : [{ machine: m.name, seconds: m.joinSeconds }])),
    ...(kubernetes === undefined ? {} : { apiservers: observedApiservers(machines, (boundT0 - evidence.t0) / 1000) }),
  }, kubernetes?.apiserverSeconds);
  const latencies = machines.flatMap((m) => (m.promotionLatencySeconds === null ? [] : [m.promotionLatencySeconds]));
  const result: StrategyRun = {
    strategy: evidence.strategy,
    cluster: evidence.cluster,
    seconds: runSeconds,
    boundSeconds,
    efficiency: ratio(boundSeconds, runSeconds),
    modelError: boundSeconds > runSeconds || ahead.length > 0,
    milestonesAhead: ahead,
    linkBytes: evidence.linkBytes,
    loadAverage: evidence.loadAverage,
    bound: { inputs, ...bound },
    promotionLatency: medianAndMax(latencies),
    passes: evidence.passes,
    // etcd's refusals (5 s rule, not in sync) are recorded as Refused; other failed attempts count too.
    refusals: evidence.events.filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action) && (e.outcome === 'Refused' || e.outcome === 'Failed')).length,
    machines,
    joinPhaseSeconds: joinPhase(changes),
    membership: changes.map((e) => ({ action: e.action ?? '', machine: e.machine ?? null, at: seconds(e.at - evidence.t0), endedAt: seconds((e.endedAt ?? e.at) - evidence.t0) })),
  };
  if (evidence.stages) result.stages = evidence.stages;
  if (evidence.components) result.memory = { controlPlanePeakRssBytes: evidence.components.controlPlanePeakRssBytes, samples: evidence.components.samples, intervalMs: evidence.components.intervalMs };
  return result;
}

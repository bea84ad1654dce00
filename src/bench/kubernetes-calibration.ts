import { setTimeout as sleep } from 'node:timers/promises';
import type { ComponentKind, KubernetesComponent, KubernetesLaunch, KubernetesMachines } from '../ports/machine-provider.ts';
import { cpuSeconds } from './process-cpu.ts';
import type { ComponentPids } from './process-memory.ts';
import { seconds } from './stats.ts';

/**
 * What a machine's Kubernetes components cost to start on this host, measured before the runs on a
 * machine whose etcd member is a voter (a 1-member cluster, as the init machine of a run), by driving
 * the provider directly at 20 ms resolution (no reconcile loop):
 *  - apiserver: kube-apiserver started to its `/readyz` answering ok;
 *  - controllers: kube-controller-manager and kube-scheduler started together to both `/healthz` ok.
 * Each sample stops the three and starts them again on the same member: the first start writes the
 * bootstrap objects into etcd, as a run's first apiserver does; the later ones find them there, as a
 * run's other machines do.
 *
 * Each sample also weighs the CPU (user and system) the machine's processes spent on each step: for
 * the apiserver, kube-apiserver's own plus what the etcd member spent meanwhile; for the controllers,
 * theirs plus what the apiserver and the member spent meanwhile. A step's CPU is read before the last
 * health poll that still found it not ready, so it is CPU the step had to spend (a floor: the few
 * milliseconds up to the ready answer are left out), whatever else ran on the host.
 */

export interface KubernetesCalibrationWorld {
  machines: KubernetesMachines;
  launch: KubernetesLaunch;
  cluster: string;
  /** The PIDs of a machine's member and components (the provider's records); without it no CPU is weighed. */
  pids?: (machine: string) => ComponentPids;
}

export interface KubernetesSample {
  apiserver: number;
  controllers: number;
  /** CPU seconds of each step; null when a process could not be read. */
  apiserverCpu: number | null;
  controllersCpu: number | null;
}

/** The calibration's Kubernetes terms (`calibration.kubernetes` of a bench result). */
export interface KubernetesCalibration {
  version: string;
  coldSeconds: { apiserver: number; controllers: number };
  apiserverSamplesSeconds: number[];
  controllersSamplesSeconds: number[];
  /** The fastest of every sample, cold or warm: the critical path's terms. */
  apiserverSeconds: number;
  controllersSeconds: number;
  /**
   * The CPU of each step, in CPU seconds (absent in results before the shared-CPU term): the cold
   * sample's, the warm ones read, and the least of all of them, the shared-CPU term's work per
   * machine; null when no sample could read its processes (another provider than local).
   */
  coldCpuSeconds?: { apiserver: number | null; controllers: number | null };
  apiserverCpuSamplesSeconds?: number[];
  controllersCpuSamplesSeconds?: number[];
  apiserverCpuSeconds?: number | null;
  controllersCpuSeconds?: number | null;
}

const POLL_MS = 20;
const WAIT_MS = 120_000;
const CONTROLLERS: readonly KubernetesComponent[] = ['kube-controller-manager', 'kube-scheduler'];

/** CPU seconds used so far by each process of the machine that could be read. */
type Reading = Partial<Record<ComponentKind, number>>;

function reading(world: KubernetesCalibrationWorld, machine: string, kinds: readonly ComponentKind[]): Reading {
  const pids = world.pids?.(machine) ?? {};
  const read: Reading = {};
  for (const kind of kinds) {
    const pid = pids[kind];
    const cpu = pid === undefined ? undefined : cpuSeconds(pid);
    if (cpu !== undefined) read[kind] = cpu;
  }
  return read;
}

/** What `kinds` spent between two readings; null when one was not read at either end. */
function spent(from: Reading, to: Reading, kinds: readonly ComponentKind[]): number | null {
  let sum = 0;
  for (const kind of kinds) {
    const a = from[kind];
    const b = to[kind];
    if (a === undefined || b === undefined) return null;
    sum += b - a;
  }
  return Math.round(sum * 1000) / 1000;
}

/**
 * Waits until the components answer healthy; returns `meter()` as read just before the last poll that
 * found them not yet healthy (`before` when the first poll did): a moment they were not yet ready.
 */
async function healthyWithin(world: KubernetesCalibrationWorld, machine: string, components: readonly KubernetesComponent[], meter: () => Reading, before: Reading): Promise<Reading> {
  const deadline = Date.now() + WAIT_MS;
  let notYet = before;
  for (;;) {
    const read = meter();
    const health = await world.machines.componentHealth(world.cluster, machine);
    if (components.every((c) => health[c].healthy)) return notYet;
    notYet = read;
    if (Date.now() > deadline) {
      throw new Error(`calibration: ${machine}'s ${components.join(' and ')} not healthy within ${String(WAIT_MS / 1000)} s (${components.map((c) => `${c}: ${health[c].reason ?? 'healthy'}`).join('; ')})`);
    }
    await sleep(POLL_MS);
  }
}

const APISERVER_STEP: readonly ComponentKind[] = ['etcd', 'kube-apiserver'];
const CONTROLLERS_STEP: readonly ComponentKind[] = [...APISERVER_STEP, ...CONTROLLERS];

/** One start of the machine's components, in the planner's order; they are stopped again afterwards. */
export async function kubernetesSample(world: KubernetesCalibrationWorld, machine: string): Promise<KubernetesSample> {
  try {
    // A component about to start has spent nothing yet; the member (and then the apiserver) is read.
    const atStart: Reading = { ...reading(world, machine, ['etcd']), 'kube-apiserver': 0 };
    const started = Date.now();
    await world.machines.startComponent(world.cluster, machine, 'kube-apiserver', world.launch);
    const apiserverDone = await healthyWithin(world, machine, ['kube-apiserver'], () => reading(world, machine, APISERVER_STEP), atStart);
    const ready = Date.now();
    const atControllers: Reading = { ...reading(world, machine, APISERVER_STEP), 'kube-controller-manager': 0, 'kube-scheduler': 0 };
    await Promise.all(CONTROLLERS.map((c) => world.machines.startComponent(world.cluster, machine, c, world.launch)));
    const controllersDone = await healthyWithin(world, machine, CONTROLLERS, () => reading(world, machine, CONTROLLERS_STEP), atControllers);
    return {
      apiserver: seconds(ready - started),
      controllers: seconds(Date.now() - ready),
      apiserverCpu: spent(atStart, apiserverDone, APISERVER_STEP),
      controllersCpu: spent(atControllers, controllersDone, CONTROLLERS_STEP),
    };
  } finally {
    await world.machines.stopComponents(world.cluster, machine);
  }
}

const least = (values: (number | null)[]): number | null => {
  const known = values.filter((v): v is number => v !== null);
  return known.length === 0 ? null : Math.min(...known);
};

/**
 * The terms from a cold sample and the warm ones: the fastest time of each step and its least CPU,
 * cold sample included (a floor may use any cost this host has shown).
 */
export function kubernetesCalibration(version: string, starts: { cold: KubernetesSample; warm: KubernetesSample[] }): KubernetesCalibration {
  const all = [starts.cold, ...starts.warm];
  return {
    version,
    coldSeconds: { apiserver: starts.cold.apiserver, controllers: starts.cold.controllers },
    apiserverSamplesSeconds: starts.warm.map((s) => s.apiserver),
    controllersSamplesSeconds: starts.warm.map((s) => s.controllers),
    apiserverSeconds: Math.min(...all.map((s) => s.apiserver)),
    controllersSeconds: Math.min(...all.map((s) => s.controllers)),
    coldCpuSeconds: { apiserver: starts.cold.apiserverCpu, controllers: starts.cold.controllersCpu },
    apiserverCpuSamplesSeconds: starts.warm.flatMap((s) => (s.apiserverCpu === null ? [] : [s.apiserverCpu])),
    controllersCpuSamplesSeconds: starts.warm.flatMap((s) => (s.controllersCpu === null ? [] : [s.controllersCpu])),
    apiserverCpuSeconds: least(all.map((s) => s.apiserverCpu)),
    controllersCpuSeconds: least(all.map((s) => s.controllersCpu)),
  };
}

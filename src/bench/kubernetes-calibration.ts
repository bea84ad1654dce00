import { setTimeout as sleep } from 'node:timers/promises';
import type { KubernetesComponent, KubernetesLaunch, KubernetesMachines } from '../ports/machine-provider.ts';
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
 */

export interface KubernetesCalibrationWorld {
  machines: KubernetesMachines;
  launch: KubernetesLaunch;
  cluster: string;
}

export interface KubernetesSample {
  apiserver: number;
  controllers: number;
}

const POLL_MS = 20;
const WAIT_MS = 120_000;
const CONTROLLERS: readonly KubernetesComponent[] = ['kube-controller-manager', 'kube-scheduler'];

async function healthyWithin(world: KubernetesCalibrationWorld, machine: string, components: readonly KubernetesComponent[]): Promise<void> {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const health = await world.machines.componentHealth(world.cluster, machine);
    if (components.every((c) => health[c].healthy)) return;
    if (Date.now() > deadline) {
      throw new Error(`calibration: ${machine}'s ${components.join(' and ')} not healthy within ${String(WAIT_MS / 1000)} s (${components.map((c) => `${c}: ${health[c].reason ?? 'healthy'}`).join('; ')})`);
    }
    await sleep(POLL_MS);
  }
}

/** One start of the machine's components, in the planner's order; they are stopped again afterwards. */
export async function kubernetesSample(world: KubernetesCalibrationWorld, machine: string): Promise<KubernetesSample> {
  try {
    const started = Date.now();
    await world.machines.startComponent(world.cluster, machine, 'kube-apiserver', world.launch);
    await healthyWithin(world, machine, ['kube-apiserver']);
    const ready = Date.now();
    await Promise.all(CONTROLLERS.map((c) => world.machines.startComponent(world.cluster, machine, c, world.launch)));
    await healthyWithin(world, machine, CONTROLLERS);
    return { apiserver: seconds(ready - started), controllers: seconds(Date.now() - ready) };
  } finally {
    await world.machines.stopComponents(world.cluster, machine);
  }
}

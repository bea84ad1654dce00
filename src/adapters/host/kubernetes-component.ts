import type { ComponentHealth, KubernetesComponent, KubernetesLaunch, MachineComponent } from '../../ports/machine-provider.ts';
import { getText, type ProbeTls } from './http-probe.ts';

/**
 * What a provider does its own way for one of a machine's Kubernetes components: run its process and
 * tell whether it runs. Health and version are asked of the component itself, the same for every
 * provider.
 */
export interface KubernetesProcess {
  start(launch: KubernetesLaunch): Promise<void>;
  stop(): Promise<void>;
  running(): Promise<boolean>;
  /** `https://address:port` of its secure port; undefined while the machine has no address yet. */
  url(): Promise<string | undefined>;
  /** How its serving certificate is checked: against the Kubernetes CA (the apiserver's), or not (self-signed in memory). */
  probeTls(): Promise<ProbeTls>;
  /** The version its running program reports (`--version`); undefined when it does not run. */
  programVersion(): Promise<string | undefined>;
}

/** A probe never holds a pass up for long: a component that does not answer in time is not healthy. */
const PROBE_TIMEOUT_MS = 2_000;

/**
 * Where each component says it is healthy, as kubeadm's probes ask: the apiserver's /readyz (ready to
 * serve: etcd reached, bootstrap done), the others' /healthz. All three allow it without credentials.
 */
const HEALTH_PATH: Readonly<Record<KubernetesComponent, string>> = {
  'kube-apiserver': '/readyz',
  'kube-controller-manager': '/healthz',
  'kube-scheduler': '/healthz',
};

export function kubernetesComponent<K extends KubernetesComponent>(kind: K, process: KubernetesProcess): MachineComponent<K> {
  const get = async (path: string): Promise<{ status: number; body: string }> => {
    const url = await process.url();
    if (url === undefined) throw new Error('the machine has no address yet');
    return getText(`${url}${path}`, await process.probeTls(), PROBE_TIMEOUT_MS);
  };
  return {
    kind,
    start: (launch) => process.start(launch),
    stop: () => process.stop(),
    async health(): Promise<ComponentHealth> {
      if (!(await process.running())) return { running: false, healthy: false, reason: 'its process is not running' };
      try {
        const answer = await get(HEALTH_PATH[kind]);
        if (answer.status === 200 && answer.body.trim() === 'ok') return { running: true, healthy: true };
        return { running: true, healthy: false, reason: `${HEALTH_PATH[kind]} answered ${String(answer.status)}: ${answer.body.trim().slice(0, 300)}` };
      } catch (error) {
        return { running: true, healthy: false, reason: error instanceof Error ? error.message : String(error) };
      }
    },
    async version(): Promise<string | undefined> {
      if (kind !== 'kube-apiserver') return process.programVersion();
      try {
        const answer = await get('/version');
        const gitVersion = (JSON.parse(answer.body) as { gitVersion?: unknown }).gitVersion;
        return answer.status === 200 && typeof gitVersion === 'string' ? gitVersion.replace(/^v/, '') : undefined;
      } catch {
        return undefined;
      }
    },
  };
}

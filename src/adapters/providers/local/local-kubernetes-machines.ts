import { join } from 'node:path';
import { KUBERNETES_COMPONENTS, type ComponentHealth, type Fence, type KubernetesComponent, type KubernetesLaunch, type KubernetesMachines, type MachineComponents } from '../../../ports/machine-provider.ts';
import { HaproxyEndpoint } from '../../endpoint/haproxy-endpoint.ts';
import { KUBERNETES_PORTS } from '../../host/kubernetes-flags.ts';
import { hostOf } from '../../kubernetes/kubeconfig.ts';

/** What the local provider lends its Kubernetes control plane: its machines' components, addresses and folders. */
export interface LocalKubernetesHost {
  components(cluster: string, name: string, fence?: Fence): MachineComponents;
  /** The machine's address, undefined when it has none (gone). */
  machineAddress(cluster: string, name: string): Promise<string | undefined>;
  /** The cluster's address block's own address, `<prefix>.<slot>.0`: no machine has ordinal 0. */
  clusterAddress(cluster: string): Promise<string>;
  clusterDir(cluster: string): string;
  kubeconfig(cluster: string, server: string): Promise<string>;
  renewClusterCertificates(cluster: string, nextEtcdCa: boolean): Promise<void>;
  /** The machine's apiserver serving certificate issued anew, naming its address and `endpointHost`. */
  renewMachineCertificates(cluster: string, name: string, endpointHost: string): Promise<void>;
}

const NOT_RUN: ComponentHealth = { running: false, healthy: false, reason: 'this provider does not run it' };

/**
 * The local provider's Kubernetes control planes: the machines' components (local-kubernetes.ts) and one
 * HAProxy per cluster as its endpoint, on the block's address `<prefix>.<slot>.0:6443`, its folder
 * `<cluster>/endpoint/` beside the machines'.
 */
export class LocalKubernetesMachines implements KubernetesMachines {
  constructor(private readonly host: LocalKubernetesHost) {}

  async startComponent(cluster: string, name: string, component: KubernetesComponent, launch: KubernetesLaunch, fence?: Fence): Promise<void> {
    const started = this.host.components(cluster, name, fence)[component];
    if (started === undefined) throw new Error(`machine ${cluster}/${name} has no ${component}`);
    // The apiserver's serving certificate names the endpoint, so clients may reach it through either.
    await started.start({ ...launch, endpoint: (await this.endpoint(cluster)).address });
  }

  async stopComponents(cluster: string, name: string, fence?: Fence): Promise<void> {
    const components = this.host.components(cluster, name, fence);
    for (const kind of [...KUBERNETES_COMPONENTS].reverse()) await components[kind]?.stop();
  }

  async componentHealth(cluster: string, name: string): Promise<Record<KubernetesComponent, ComponentHealth>> {
    const components = this.host.components(cluster, name);
    const [apiserver, controllerManager, scheduler] = await Promise.all(KUBERNETES_COMPONENTS.map((kind) => components[kind]?.health() ?? Promise.resolve(NOT_RUN)));
    return { 'kube-apiserver': apiserver ?? NOT_RUN, 'kube-controller-manager': controllerManager ?? NOT_RUN, 'kube-scheduler': scheduler ?? NOT_RUN };
  }

  async endpoint(cluster: string): Promise<HaproxyEndpoint> {
    return new HaproxyEndpoint({ dir: join(this.host.clusterDir(cluster), 'endpoint'), address: `${await this.host.clusterAddress(cluster)}:${String(KUBERNETES_PORTS['kube-apiserver'])}` });
  }

  async route(cluster: string, machines: readonly string[]): Promise<void> {
    const backends = await Promise.all(machines.map(async (machine) => ({ machine, address: await this.apiserverAddress(cluster, machine) })));
    await (await this.endpoint(cluster)).route(backends);
  }

  adminKubeconfig(cluster: string, server: string): Promise<string> {
    return this.host.kubeconfig(cluster, server);
  }

  renewClusterCertificates(cluster: string, options: { nextEtcdCa?: boolean } = {}): Promise<void> {
    return this.host.renewClusterCertificates(cluster, options.nextEtcdCa === true);
  }

  async renewMachineCertificates(cluster: string, name: string): Promise<void> {
    await this.host.renewMachineCertificates(cluster, name, hostOf((await this.endpoint(cluster)).address));
  }

  async apiserverAddress(cluster: string, name: string): Promise<string> {
    const address = await this.host.machineAddress(cluster, name);
    if (address === undefined) throw new Error(`machine ${cluster}/${name} has no address`);
    return `${address}:${String(KUBERNETES_PORTS['kube-apiserver'])}`;
  }
}

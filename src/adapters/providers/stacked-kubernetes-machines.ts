import { KUBERNETES_COMPONENTS, type ComponentHealth, type ControlPlaneEndpoint, type Fence, type KubernetesComponent, type KubernetesLaunch, type KubernetesMachines, type MachineComponents } from '../../ports/machine-provider.ts';
import { KUBERNETES_PORTS } from '../host/kubernetes-flags.ts';
import { hostOf } from '../kubernetes/kubeconfig.ts';

/** What a provider lends its Kubernetes control planes: its machines' components and addresses, and each cluster's endpoint. */
export interface StackedKubernetesHost {
  components(cluster: string, name: string, fence?: Fence): MachineComponents;
  /** The machine's address, undefined when it has none (gone, or no host yet). */
  machineAddress(cluster: string, name: string): Promise<string | undefined>;
  /** The cluster's control-plane endpoint, as the provider places it. */
  endpoint(cluster: string): Promise<ControlPlaneEndpoint>;
  kubeconfig(cluster: string, server: string): Promise<string>;
  renewClusterCertificates(cluster: string, nextEtcdCa: boolean): Promise<void>;
  /** The machine's apiserver serving certificate issued anew, naming its address and `endpointHost`. */
  renewMachineCertificates(cluster: string, name: string, endpointHost: string): Promise<void>;
}

const NOT_RUN: ComponentHealth = { running: false, healthy: false, reason: 'this provider does not run it' };

/**
 * The Kubernetes control planes of a provider that runs the components itself, stacked on each
 * machine's member (kubeadm's stacked topology): the provider runs the processes (its components) and
 * places the endpoint; what is asked of them is the same for every such provider.
 */
export class StackedKubernetesMachines implements KubernetesMachines {
  constructor(private readonly host: StackedKubernetesHost) {}

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

  endpoint(cluster: string): Promise<ControlPlaneEndpoint> {
    return this.host.endpoint(cluster);
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

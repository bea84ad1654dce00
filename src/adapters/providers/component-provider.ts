import type { TlsFiles } from '../../ports/etcd-admin.ts';
import type { CaRotationPhase, Fence, MachineComponents, MemberLaunch } from '../../ports/machine-provider.ts';
import { etcdComponent, type EtcdProcess } from '../host/etcd-component.ts';
import { kubeconfigYaml } from '../kubernetes/kubeconfig.ts';
import { ClusterPki } from '../pki/cluster-pki.ts';
import type { StoredClusterState } from '../stored-cluster-state.ts';

export interface ComponentProviderOptions {
  /** Plain http and no certificates for the machines it creates (debugging only); default false. */
  insecure?: boolean;
  /** Lifetime of member and client certificates (tests only, FASTPLANE_CERT_VALIDITY); default a year. */
  certValidityMs?: number | undefined;
}

/**
 * What every provider of machines fastplane runs processes on shares, once: a machine is made of
 * components, the loop reaches its member through the etcd component, and the cluster's certificates
 * are a ClusterPki kept in the record store. A provider adds only how its machines come and go and how
 * a process runs on them (`etcdProcess`: a local process, or a command over ssh).
 */
export abstract class ComponentProvider {
  protected readonly pki: ClusterPki;
  protected readonly insecure: boolean;

  constructor(options: ComponentProviderOptions) {
    this.insecure = options.insecure ?? false;
    this.pki = new ClusterPki((cluster) => this.state(cluster), options.certValidityMs);
  }

  /** The cluster's provider state in the record store, with this host's copy of its files. */
  protected abstract state(cluster: string): StoredClusterState;

  /** How the machine's etcd process is run and seen: what differs between providers. Starts and stops are checked against `fence` on the machine. */
  protected abstract etcdProcess(cluster: string, name: string, fence: Fence): EtcdProcess;

  abstract machineNames(cluster: string): Promise<string[]>;

  components(cluster: string, name: string, fence?: Fence): MachineComponents {
    return { etcd: etcdComponent(this.etcdProcess(cluster, name, fence), () => this.loadClientTls(cluster)) };
  }

  startMember(cluster: string, name: string, launch: MemberLaunch, fence?: Fence): Promise<void> {
    return this.components(cluster, name, fence).etcd.start(launch);
  }

  stopMember(cluster: string, name: string, fence?: Fence): Promise<void> {
    return this.components(cluster, name, fence).etcd.stop();
  }

  /**
   * The text of an admin kubeconfig for the cluster's Kubernetes control plane reached at
   * `endpointAddress` (`host` or `host:port`, port 6443 by default): the Kubernetes CA and the admin
   * client certificate embedded, so it stands alone; the caller prints it or writes it where it wants.
   */
  kubeconfig(cluster: string, endpointAddress: string): Promise<string> {
    return this.pki.readKubernetes(cluster, (files) => kubeconfigYaml({ cluster, server: endpointAddress, caFile: files.ca.cert, user: 'kubernetes-admin', client: files.clients.admin }));
  }

  /** fastplane's client credentials for the cluster's members; undefined when insecure. */
  clientTls(cluster: string): TlsFiles | undefined {
    return this.insecure ? undefined : this.pki.clientTls(cluster);
  }

  loadClientTls(cluster: string): Promise<TlsFiles | undefined> {
    return this.insecure ? Promise.resolve(undefined) : this.pki.loadClientTls(cluster);
  }

  /** Every certificate file of the cluster: its CA, fastplane's client, each machine's server and peer. */
  async certificateFiles(cluster: string): Promise<string[]> {
    return this.pki.certificateFiles(cluster, await this.machineNames(cluster));
  }

  renewClientCertificate(cluster: string): Promise<void> {
    return this.pki.renewClientCertificate(cluster);
  }

  /** Where a CA rotation (`certs renew --ca`) stands: which rolling restart is due next. */
  caRotationPhase(cluster: string): Promise<CaRotationPhase | undefined> {
    return this.pki.caRotationPhase(cluster);
  }

  /** Its files are in the record store, and reach each machine as its member restarts; the cluster's fence first. */
  async advanceCaRotation(cluster: string, phase: CaRotationPhase | undefined, fence?: Fence): Promise<void> {
    await this.underClusterFence(cluster, fence, () => this.pki.advanceCaRotation(cluster, phase));
  }

  /** Runs an act on the whole cluster under its fence: refused (StaleFenceError) when a newer lease holder acted on it. */
  protected abstract underClusterFence<T>(cluster: string, fence: Fence, act: () => Promise<T>): Promise<T>;
}

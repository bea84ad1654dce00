import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { TlsFiles } from '../../ports/etcd-admin.ts';
import type { CaRotationPhase } from '../../ports/machine-provider.ts';
import type { StoredClusterState } from '../stored-cluster-state.ts';
import { clientTlsFiles, KUBERNETES_PKI, kubernetesClusterFiles, kubernetesFiles, kubernetesMachinePki, memberTlsFiles, type KubernetesClusterFiles, type KubernetesFiles, type MemberTlsFiles } from './pki-files.ts';

const loadPki = (): Promise<typeof import('./local-pki.ts')> => import('./local-pki.ts');
const loadKubernetesPki = (): Promise<typeof import('./kubernetes-pki.ts')> => import('./kubernetes-pki.ts');

/**
 * A cluster's certificates as both providers keep them: the CA and fastplane's client certificate in
 * `pki/`, each machine's in `machines/<name>/pki/`, all kept in the record store (StoredClusterState)
 * and worked on in this host's copy. The x509 code loads only when a certificate is made.
 */
export class ClusterPki {
  constructor(
    private readonly state: (cluster: string) => StoredClusterState,
    /** Lifetime of member and client certificates (tests only); default a year. */
    private readonly validityMs?: number,
  ) {}

  pkiDir(cluster: string): string {
    return join(this.state(cluster).cacheDir, 'pki');
  }

  memberDir(cluster: string, name: string): string {
    return join(this.state(cluster).cacheDir, memberPki(name));
  }

  /** fastplane's client files as last read or stored on this host: whole, of one stored generation. */
  clientTls(cluster: string): TlsFiles {
    return clientTlsFiles(join(this.state(cluster).currentDir(), 'pki'));
  }

  /** The client certificate's files, brought to this host from the record store first. */
  loadClientTls(cluster: string): Promise<TlsFiles> {
    return this.state(cluster).readFiles(() => Promise.resolve(this.clientTls(cluster)));
  }

  /** A member's server and peer certificates for its address (new ones with `renew`); the CA made on first use. */
  async issueMember(cluster: string, name: string, address: string, renew = false): Promise<MemberTlsFiles> {
    const pki = await loadPki();
    return this.state(cluster).withFiles(['pki', memberPki(name)], () => pki.issueMemberCertificates(this.pkiDir(cluster), this.memberDir(cluster, name), name, address, { renew, validityMs: this.validityMs }));
  }

  /** Runs `use` on a copy of the CA and a member's certificates, as stored; nothing is stored back. */
  readMember<T>(cluster: string, name: string, use: (files: MemberTlsFiles) => Promise<T>): Promise<T> {
    return this.state(cluster).readFiles((root) => use(memberTlsFiles(join(root, 'pki'), join(root, memberPki(name)))));
  }

  /** Runs `use` on a copy of the CA files as stored (`pkiDir`); nothing is stored back. */
  readCa<T>(cluster: string, use: (pkiDir: string) => Promise<T>): Promise<T> {
    return this.state(cluster).readFiles((root) => use(join(root, 'pki')));
  }

  /** A machine's certificates (etcd's and Kubernetes'), gone from the store and from this host. */
  async forgetMember(cluster: string, name: string, remove: () => Promise<void>): Promise<void> {
    await this.state(cluster).withFiles([memberPki(name), kubernetesMachinePki(name)], remove);
  }

  /**
   * The Kubernetes files machine `name` at `address` needs (kubernetes-pki.ts), the cluster's made on
   * first use, brought to this host's copy from the store: the paths its components are started with.
   * `endpointAddress`: the control-plane endpoint's IP, named in the apiserver's certificate; `renew`:
   * a new serving certificate regardless.
   */
  async issueKubernetesMachine(cluster: string, name: string, address: string, endpointAddress?: string, renew = false): Promise<KubernetesFiles> {
    const pki = await loadKubernetesPki();
    const state = this.state(cluster);
    return state.withFiles(['pki', KUBERNETES_PKI, kubernetesMachinePki(name)], () => pki.issueKubernetesMachine(state.cacheDir, name, address, endpointAddress, { renew, validityMs: this.validityMs }));
  }

  /**
   * New keys and certificates for the cluster's Kubernetes clients (apiserver-etcd-client from the etcd
   * CA's signing key, front-proxy-client, admin, controller-manager, scheduler); the CAs and the
   * service-account key stay. Running components keep what they loaded until they restart.
   * `nextEtcdCa`: the etcd client from the etcd CA a rotation is bringing in.
   */
  async renewKubernetesCluster(cluster: string, nextEtcdCa = false): Promise<void> {
    const pki = await loadKubernetesPki();
    const state = this.state(cluster);
    await state.withFiles(['pki', KUBERNETES_PKI], () => pki.issueKubernetesCluster(state.cacheDir, { renew: true, nextEtcdCa, validityMs: this.validityMs }));
  }

  /** Runs `use` on a copy of the cluster's Kubernetes files as stored, made on first use. */
  async readKubernetes<T>(cluster: string, use: (files: KubernetesClusterFiles) => Promise<T>): Promise<T> {
    const pki = await loadKubernetesPki();
    const state = this.state(cluster);
    await state.withFiles(['pki', KUBERNETES_PKI], () => pki.issueKubernetesCluster(state.cacheDir, { validityMs: this.validityMs }));
    return state.readFiles((root) => use(kubernetesClusterFiles(root)));
  }

  async renewClientCertificate(cluster: string): Promise<void> {
    const pki = await loadPki();
    await this.withCa(cluster, () => pki.renewClientCertificate(this.pkiDir(cluster), this.validityMs));
  }

  async caRotationPhase(cluster: string): Promise<CaRotationPhase | undefined> {
    const pki = await loadPki();
    return this.readCa(cluster, (pkiDir) => pki.caRotationPhase(pkiDir));
  }

  /**
   * A CA rotation's phase applied to every CA of the cluster: the etcd CA, and on a Kubernetes control
   * plane the Kubernetes and front-proxy CAs, stored together. The etcd step records the phase, last:
   * a crash before it repeats the whole phase, each step idempotent.
   */
  async advanceCaRotation(cluster: string, phase: CaRotationPhase | undefined): Promise<void> {
    const [pki, kubernetesPki] = await Promise.all([loadPki(), loadKubernetesPki()]);
    const state = this.state(cluster);
    await state.withFiles(['pki', KUBERNETES_PKI], async () => {
      await kubernetesPki.rotateKubernetesAuthorities(state.cacheDir, phase);
      await pki.advanceCaRotation(this.pkiDir(cluster), phase);
    });
  }

  /**
   * Every certificate file of the cluster as stored: its CA, fastplane's client, each named machine's
   * server and peer; on a Kubernetes control plane also its CAs, its clients' certificates and each
   * machine's apiserver serving certificate. Named under `current`, so a file keeps its name from one
   * generation to the next.
   */
  certificateFiles(cluster: string, names: readonly string[]): Promise<string[]> {
    const state = this.state(cluster);
    const client = clientTlsFiles('pki');
    const members = names.flatMap((name) => {
      const files = memberTlsFiles('pki', memberPki(name));
      return [files.certFile, files.peerCertFile];
    });
    const kubernetes = kubernetesClusterFiles('');
    const kubernetesCerts = [kubernetes.ca, kubernetes.frontProxyCa, kubernetes.frontProxyClient, kubernetes.apiserverEtcdClient, ...Object.values(kubernetes.clients)].map((pair) => pair.cert);
    const apiservers = names.map((name) => kubernetesFiles('', name).apiserver.cert);
    const paths = [client.caFile, client.certFile, ...members, ...kubernetesCerts, ...apiservers];
    return state.readFiles((root) => Promise.resolve(paths.filter((path) => existsSync(join(root, path))).map((path) => join(state.currentDir(), path))));
  }

  /** Runs `use` on this host's copy of the CA files, as stored, and stores what it leaves there. */
  private withCa<T>(cluster: string, use: () => Promise<T>): Promise<T> {
    return this.state(cluster).withFiles(['pki'], use);
  }
}

/** A machine's certificates in the cluster's folder. */
export function memberPki(name: string): string {
  return `machines/${name}/pki`;
}

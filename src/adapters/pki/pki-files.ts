import { join } from 'node:path';
import type { TlsFiles } from '../../ports/etcd-admin.ts';

// Where the local provider's certificates live, apart from local-pki.ts: naming the files needs no
// x509 library, and loading it costs every CLI start about half a second.

/** A member's certificate files (etcd --cert-file ... --peer-trusted-ca-file). */
export interface MemberTlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
  peerCertFile: string;
  peerKeyFile: string;
}

/** fastplane's client credentials of a cluster, in its `pki` folder. */
export function clientTlsFiles(pkiDir: string): TlsFiles {
  return { caFile: join(pkiDir, 'ca.crt'), certFile: join(pkiDir, 'client.crt'), keyFile: join(pkiDir, 'client.key') };
}

/** A member's files: the cluster's CA, its own certificates in memberDir. */
export function memberTlsFiles(pkiDir: string, memberDir: string): MemberTlsFiles {
  return {
    caFile: join(pkiDir, 'ca.crt'),
    certFile: join(memberDir, 'server.crt'),
    keyFile: join(memberDir, 'server.key'),
    peerCertFile: join(memberDir, 'peer.crt'),
    peerKeyFile: join(memberDir, 'peer.key'),
  };
}

/**
 * kubeadm's defaults for the cluster network, which the apiserver's certificate and flags share: the
 * service CIDR, its first address (the `kubernetes` service's cluster IP) and the DNS domain.
 */
export const KUBERNETES_NETWORK = { serviceCidr: '10.96.0.0/12', serviceIp: '10.96.0.1', dnsDomain: 'cluster.local' } as const;

/** The cluster's Kubernetes certificates and keys, kubeadm's /etc/kubernetes/pki, relative to the cluster's folder. */
export const KUBERNETES_PKI = 'kubernetes/pki';

/** A machine's own Kubernetes certificates (its apiserver's serving certificate), relative to the cluster's folder. */
export function kubernetesMachinePki(name: string): string {
  return `machines/${name}/kubernetes`;
}

/** The clients of a Kubernetes control plane that fastplane gives a kubeconfig. */
export const KUBERNETES_CLIENTS = ['admin', 'controller-manager', 'scheduler'] as const;
export type KubernetesClient = (typeof KUBERNETES_CLIENTS)[number];

export interface CertAndKey {
  cert: string;
  key: string;
}

/**
 * A cluster's Kubernetes files under kubeadm's names: the Kubernetes CA, the front-proxy CA and
 * client, the service-account key pair, the apiserver's etcd client (signed by the etcd CA, `etcdCa`)
 * and the kubeconfig clients.
 */
export interface KubernetesClusterFiles {
  ca: CertAndKey;
  /** The Kubernetes CA's signing certificate alone, for the controller-manager's CSR signer: `ca.crt` is a bundle during a rotation. */
  caSigner: string;
  frontProxyCa: CertAndKey;
  frontProxyClient: CertAndKey;
  serviceAccount: { key: string; pub: string };
  etcdCa: string;
  apiserverEtcdClient: CertAndKey;
  clients: Record<KubernetesClient, CertAndKey>;
}

/** A machine's: the cluster's, and its apiserver's serving certificate. */
export interface KubernetesFiles extends KubernetesClusterFiles {
  apiserver: CertAndKey;
}

const pair = (dir: string, base: string): CertAndKey => ({ cert: join(dir, `${base}.crt`), key: join(dir, `${base}.key`) });

/** The files of machine `name` of the cluster whose folder is `clusterDir`. */
export function kubernetesFiles(clusterDir: string, name: string): KubernetesFiles {
  return { ...kubernetesClusterFiles(clusterDir), apiserver: pair(join(clusterDir, kubernetesMachinePki(name)), 'apiserver') };
}

/** The cluster-wide files of the cluster whose folder is `clusterDir`. */
export function kubernetesClusterFiles(clusterDir: string): KubernetesClusterFiles {
  const pki = join(clusterDir, KUBERNETES_PKI);
  return {
    ca: pair(pki, 'ca'),
    caSigner: join(pki, 'ca-signer.crt'),
    frontProxyCa: pair(pki, 'front-proxy-ca'),
    frontProxyClient: pair(pki, 'front-proxy-client'),
    serviceAccount: { key: join(pki, 'sa.key'), pub: join(pki, 'sa.pub') },
    etcdCa: clientTlsFiles(join(clusterDir, 'pki')).caFile,
    apiserverEtcdClient: pair(pki, 'apiserver-etcd-client'),
    clients: { admin: pair(pki, 'admin'), 'controller-manager': pair(pki, 'controller-manager'), scheduler: pair(pki, 'scheduler') },
  };
}

import type { KubernetesComponent } from '../../ports/machine-provider.ts';
import { KUBERNETES_NETWORK, type KubernetesFiles } from '../pki/pki-files.ts';

/**
 * The command lines of a machine's Kubernetes components, shared by every provider that runs them
 * itself, as kubeadm's static Pod manifests set them (docs/kubernetes.md, "Component command lines"):
 * the same flags wherever the process runs, only the paths differ.
 */

/** Each component's secure port: kubeadm's (the apiserver's) and the programs' defaults. */
export const KUBERNETES_PORTS: Readonly<Record<KubernetesComponent, number>> = {
  'kube-apiserver': 6443,
  'kube-controller-manager': 10257,
  'kube-scheduler': 10259,
};

/** Where a machine's components run and what they read, as the process sees it. */
export interface KubernetesPlacement {
  cluster: string;
  /** The machine's own address: every component binds it, the apiserver advertises it. */
  address: string;
  /** The machine's own etcd member. */
  etcdClientURL: string;
  files: KubernetesFiles;
  /** The component's kubeconfig (controller-manager, scheduler): at the machine's own apiserver. */
  kubeconfig: string;
}

export function kubernetesFlags(kind: KubernetesComponent, placement: KubernetesPlacement): string[] {
  switch (kind) {
    case 'kube-apiserver':
      return apiserverFlags(placement);
    case 'kube-controller-manager':
      return controllerManagerFlags(placement);
    case 'kube-scheduler':
      return schedulerFlags(placement);
  }
}

function apiserverFlags({ address, etcdClientURL, files }: KubernetesPlacement): string[] {
  const args = [
    '--advertise-address', address,
    '--bind-address', address,
    '--secure-port', String(KUBERNETES_PORTS['kube-apiserver']),
    '--etcd-servers', etcdClientURL,
    '--service-cluster-ip-range', KUBERNETES_NETWORK.serviceCidr,
    '--service-account-issuer', `https://kubernetes.default.svc.${KUBERNETES_NETWORK.dnsDomain}`,
    '--service-account-key-file', files.serviceAccount.pub,
    '--service-account-signing-key-file', files.serviceAccount.key,
    '--client-ca-file', files.ca.cert,
    '--tls-cert-file', files.apiserver.cert,
    '--tls-private-key-file', files.apiserver.key,
    '--authorization-mode', 'Node,RBAC',
    '--enable-admission-plugins', 'NodeRestriction',
    '--enable-bootstrap-token-auth=true',
    '--allow-privileged=true',
    '--requestheader-client-ca-file', files.frontProxyCa.cert,
    '--requestheader-allowed-names', 'front-proxy-client',
    '--requestheader-username-headers', 'X-Remote-User',
    '--requestheader-group-headers', 'X-Remote-Group',
    '--requestheader-extra-headers-prefix', 'X-Remote-Extra-',
    '--proxy-client-cert-file', files.frontProxyClient.cert,
    '--proxy-client-key-file', files.frontProxyClient.key,
  ];
  // The `kubernetes` service's endpoints may not be loopback addresses, so the default (lease)
  // reconciler could only fail every 10 s: a machine on loopback keeps none.
  if (address.startsWith('127.')) args.push('--endpoint-reconciler-type', 'none');
  if (etcdClientURL.startsWith('https:')) args.push('--etcd-cafile', files.etcdCa, '--etcd-certfile', files.apiserverEtcdClient.cert, '--etcd-keyfile', files.apiserverEtcdClient.key);
  return args;
}

/** What the controller-manager and the scheduler share: their address, leader election, and one kubeconfig for all three uses. */
function commonFlags(kind: KubernetesComponent, { address, kubeconfig }: KubernetesPlacement): string[] {
  return [
    '--bind-address', address,
    '--secure-port', String(KUBERNETES_PORTS[kind]),
    '--leader-elect=true',
    '--kubeconfig', kubeconfig,
    '--authentication-kubeconfig', kubeconfig,
    '--authorization-kubeconfig', kubeconfig,
  ];
}

function controllerManagerFlags(placement: KubernetesPlacement): string[] {
  const { files, cluster } = placement;
  return [
    ...commonFlags('kube-controller-manager', placement),
    '--client-ca-file', files.ca.cert,
    '--requestheader-client-ca-file', files.frontProxyCa.cert,
    '--root-ca-file', files.ca.cert,
    '--service-account-private-key-file', files.serviceAccount.key,
    '--cluster-signing-cert-file', files.caSigner,
    '--cluster-signing-key-file', files.ca.key,
    '--use-service-account-credentials=true',
    '--controllers', '*,bootstrapsigner,tokencleaner',
    '--cluster-name', cluster,
  ];
}

function schedulerFlags(placement: KubernetesPlacement): string[] {
  return commonFlags('kube-scheduler', placement);
}

/**
 * The argument only this component of this machine has on its command line: the apiserver's serving
 * certificate, the others' kubeconfig. It tells our process from another that took its PID.
 */
export function componentMarker(kind: KubernetesComponent, placement: Pick<KubernetesPlacement, 'files' | 'kubeconfig'>): string {
  return kind === 'kube-apiserver' ? placement.files.apiserver.cert : placement.kubeconfig;
}

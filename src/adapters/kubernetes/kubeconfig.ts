import { readFile } from 'node:fs/promises';
import { stringify } from 'yaml';
import type { KubernetesComponent } from '../../ports/machine-provider.ts';
import type { CertAndKey, KubernetesClient, KubernetesFiles } from '../pki/pki-files.ts';

/** kube-apiserver's secure port, kubeadm's default. */
export const APISERVER_PORT = 6443;

/** The host of an address given as `host` or `host:port`. */
export function hostOf(address: string): string {
  return new URL(`https://${address}`).hostname;
}

/** `https://host:port` of an apiserver or endpoint given as `host` (port 6443) or `host:port`. */
export function apiserverURL(address: string): string {
  const url = new URL(`https://${address}`);
  return `https://${url.hostname}:${url.port === '' ? String(APISERVER_PORT) : url.port}`;
}

export interface KubeconfigSpec {
  /** The cluster's name in the kubeconfig. */
  cluster: string;
  /** `host` or `host:port` of the apiserver (or the endpoint in front of it). */
  server: string;
  /** The Kubernetes CA the server's certificate chains to. */
  caFile: string;
  user: string;
  client: CertAndKey;
}

/**
 * A kubeconfig as kubeadm writes one (admin.conf, controller-manager.conf, scheduler.conf): one
 * cluster, one user and the context joining them, with the CA and the client's certificate and key
 * embedded as base64 data, so the file stands alone.
 */
export async function kubeconfigYaml(spec: KubeconfigSpec): Promise<string> {
  const data = async (file: string): Promise<string> => (await readFile(file)).toString('base64');
  const context = `${spec.user}@${spec.cluster}`;
  return stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: spec.cluster, cluster: { 'certificate-authority-data': await data(spec.caFile), server: apiserverURL(spec.server) } }],
    contexts: [{ name: context, context: { cluster: spec.cluster, user: spec.user } }],
    'current-context': context,
    preferences: {},
    users: [{ name: spec.user, user: { 'client-certificate-data': await data(spec.client.cert), 'client-key-data': await data(spec.client.key) } }],
  }, { lineWidth: 0 });
}

const CLIENT_OF: Readonly<Record<Exclude<KubernetesComponent, 'kube-apiserver'>, KubernetesClient>> = {
  'kube-controller-manager': 'controller-manager',
  'kube-scheduler': 'scheduler',
};

/**
 * The kubeconfig of a machine's controller-manager or scheduler, as kubeadm writes
 * controller-manager.conf and scheduler.conf: its own client certificate, at its own machine's
 * apiserver (`address`, port 6443).
 */
export function componentKubeconfig(cluster: string, kind: Exclude<KubernetesComponent, 'kube-apiserver'>, address: string, files: KubernetesFiles): Promise<string> {
  return kubeconfigYaml({ cluster, server: address, caFile: files.ca.cert, user: `system:${kind}`, client: files.clients[CLIENT_OF[kind]] });
}

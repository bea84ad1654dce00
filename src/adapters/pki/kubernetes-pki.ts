import { chmod, mkdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { withLock } from '../state-files.ts';
import { ensureAuthority, nextAuthority } from './local-pki.ts';
import { KUBERNETES_NETWORK, kubernetesClusterFiles, kubernetesFiles, type CertAndKey, type KubernetesClient, type KubernetesFiles } from './pki-files.ts';
import { ensureAuthorityFiles, ensureKeyPair, ensureLeaf, subjectAltNames, x509, type Authority, type Leaf } from './x509-certificates.ts';

/**
 * A Kubernetes control plane's certificates as kubeadm lays them out (docs/kubernetes.md, "The
 * Kubernetes PKI"): per cluster a Kubernetes CA apart from the etcd CA, the front-proxy CA and its
 * client, one service-account key pair, the apiserver's etcd client signed by the etcd CA, and the
 * client certificates of the admin, the controller-manager and the scheduler; per machine its
 * apiserver's serving certificate. Idempotent, like local-pki.ts: a rerun issues only what is missing.
 */

const KUBERNETES_CA = 'CN=kubernetes';

type Options = {
  renew?: boolean;
  validityMs?: number | undefined;
  /** With `renew`: the apiserver's etcd client signed by the etcd CA a rotation is bringing in. */
  nextEtcdCa?: boolean;
};

const CLIENT_SUBJECTS: Record<KubernetesClient, { commonName: string; organization?: string }> = {
  // kubeadm's super-admin.conf: the group system:masters passes every authorization check, needing no RBAC binding.
  admin: { commonName: 'kubernetes-admin', organization: 'system:masters' },
  'controller-manager': { commonName: 'system:kube-controller-manager' },
  scheduler: { commonName: 'system:kube-scheduler' },
};

/** The names a machine's apiserver answers to besides addresses: the `kubernetes` service's, short to fully qualified. */
export const APISERVER_DNS_NAMES = ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', `kubernetes.default.svc.${KUBERNETES_NETWORK.dnsDomain}`];

/** The cluster-wide files of the Kubernetes control plane whose folder is `clusterDir`, created on first use. */
export async function issueKubernetesCluster(clusterDir: string, options: Options = {}): Promise<void> {
  const files = kubernetesClusterFiles(clusterDir);
  const pkiDir = dirname(files.ca.cert);
  await mkdir(pkiDir, { recursive: true, mode: 0o700 });
  await chmod(pkiDir, 0o700);
  // The etcd CA first (its own lock): the apiserver's etcd client chains to it.
  const current = await ensureAuthority(dirname(files.etcdCa), options.validityMs);
  const etcdCa = options.nextEtcdCa === true ? await nextAuthority(dirname(files.etcdCa)) : current;
  // A cluster's machines start in parallel (and maybe from two CLI processes): one of each only.
  await withLock(join(pkiDir, 'ca.lock'), async () => {
    const renew = options.renew === true;
    const leaf = (base: Omit<Leaf, 'validityMs'>): Leaf => ({ ...base, validityMs: options.validityMs });
    const ca = await ensureAuthorityFiles(files.ca.key, files.ca.cert, KUBERNETES_CA);
    const frontProxyCa = await ensureAuthorityFiles(files.frontProxyCa.key, files.frontProxyCa.cert, 'CN=front-proxy-ca');
    const client = [x509.ExtendedKeyUsage.clientAuth];
    await issue(frontProxyCa, files.frontProxyClient, leaf({ commonName: 'front-proxy-client', usages: client, addresses: [] }), renew);
    await issue(etcdCa, files.apiserverEtcdClient, leaf({ commonName: 'kube-apiserver-etcd-client', usages: client, addresses: [] }), renew);
    for (const [name, subject] of Object.entries(CLIENT_SUBJECTS)) {
      await issue(ca, files.clients[name as KubernetesClient], leaf({ ...subject, usages: client, addresses: [] }), renew);
    }
    await ensureKeyPair(files.serviceAccount.key, files.serviceAccount.pub);
  });
}

/**
 * What machine `name` at `address` needs (the cluster's files created first): its apiserver's
 * serving certificate for its address, the control-plane endpoint's (when known), 127.0.0.1, the
 * `kubernetes` service's cluster IP and DNS names. A certificate naming other addresses (the endpoint
 * moved) is issued anew, and so is any with `renew`.
 */
export async function issueKubernetesMachine(clusterDir: string, name: string, address: string, endpointAddress: string | undefined, options: Options = {}): Promise<KubernetesFiles> {
  // `renew` is the machine's own certificate only: the cluster's are renewed once, for every machine.
  await issueKubernetesCluster(clusterDir, { validityMs: options.validityMs });
  const files = kubernetesFiles(clusterDir, name);
  await mkdir(dirname(files.apiserver.cert), { recursive: true, mode: 0o700 });
  const addresses = [...new Set([address, ...(endpointAddress === undefined ? [] : [endpointAddress]), '127.0.0.1', KUBERNETES_NETWORK.serviceIp])];
  const leaf: Leaf = { commonName: 'kube-apiserver', usages: [x509.ExtendedKeyUsage.serverAuth], addresses, dnsNames: APISERVER_DNS_NAMES, validityMs: options.validityMs };
  const stale = existsSync(files.apiserver.cert) && (await subjectAltNames(files.apiserver.cert)).addresses.join() !== [...addresses].sort().join();
  const ca = await withLock(join(dirname(files.ca.cert), 'ca.lock'), () => ensureAuthorityFiles(files.ca.key, files.ca.cert, KUBERNETES_CA));
  await issue(ca, files.apiserver, leaf, options.renew === true || stale);
  return files;
}

function issue(ca: Authority, pair: CertAndKey, leaf: Leaf, renew: boolean): Promise<void> {
  return ensureLeaf(ca, pair.cert, pair.key, leaf, renew);
}

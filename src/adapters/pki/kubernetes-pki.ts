import { chmod, mkdir, readFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { CaRotationPhase } from '../../ports/machine-provider.ts';
import { withLock, writeFileAtomic } from '../state-files.ts';
import { ensureAuthority, nextAuthority, nextFiles, rotateAuthority, rotationStep, type RotatingAuthority } from './local-pki.ts';
import { KUBERNETES_NETWORK, kubernetesClusterFiles, kubernetesFiles, type CertAndKey, type KubernetesClient, type KubernetesClusterFiles, type KubernetesFiles } from './pki-files.ts';
import { ensureAuthorityFiles, ensureKeyPair, ensureLeaf, loadAuthority, subjectAltNames, x509, type Authority, type Leaf } from './x509-certificates.ts';

/**
 * A Kubernetes control plane's certificates as kubeadm lays them out (docs/kubernetes.md, "The
 * Kubernetes PKI"): per cluster a Kubernetes CA apart from the etcd CA, the front-proxy CA and its
 * client, one service-account key pair, the apiserver's etcd client signed by the etcd CA, and the
 * client certificates of the admin, the controller-manager and the scheduler; per machine its
 * apiserver's serving certificate. Idempotent, like local-pki.ts: a rerun issues only what is missing.
 */

const KUBERNETES_CA = 'CN=kubernetes';
const FRONT_PROXY_CA = 'CN=front-proxy-ca';

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
    await writeSigner(files.caSigner, ca);
    const frontProxyCa = await ensureAuthorityFiles(files.frontProxyCa.key, files.frontProxyCa.cert, FRONT_PROXY_CA);
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

/**
 * The controller-manager's CSR signing certificate (`--cluster-signing-cert-file`): the one certificate
 * of the Kubernetes CA whose key signs. Its signer refuses a file of more than one certificate, so it
 * cannot read ca.crt while a rotation makes that a bundle (docs/kubernetes.md).
 */
async function writeSigner(file: string, ca: Authority): Promise<void> {
  const pem = ca.cert.toString('pem');
  if (existsSync(file) && (await readFile(file, 'utf8')) === pem) return;
  await writeFileAtomic(file, pem);
}

/** The Kubernetes CA and the front-proxy CA, as a rotation sees them. */
function authorities(files: KubernetesClusterFiles): RotatingAuthority[] {
  return [
    { ...files.ca, subject: KUBERNETES_CA },
    { ...files.frontProxyCa, subject: FRONT_PROXY_CA },
  ];
}

/**
 * A CA rotation's phase applied to the Kubernetes CA and the front-proxy CA as to the etcd CA
 * (local-pki.ts `rotateAuthority`): trust both, then sign with the new one, then trust it alone; the
 * controller-manager's signing certificate follows the signing key. Nothing on an etcd-only cluster,
 * and nothing after the first phase for a rotation begun before the Kubernetes CAs were part of one
 * (it has no next Kubernetes CA).
 */
export async function rotateKubernetesAuthorities(clusterDir: string, phase: CaRotationPhase | undefined): Promise<void> {
  const files = kubernetesClusterFiles(clusterDir);
  if (!existsSync(files.ca.cert)) return;
  const step = rotationStep(phase);
  await withLock(join(dirname(files.ca.cert), 'ca.lock'), async () => {
    for (const ca of authorities(files)) {
      if (step === 'trust' || existsSync(nextFiles(ca).cert)) await rotateAuthority(ca, step);
    }
    await writeSigner(files.caSigner, await loadAuthority(files.ca.key, files.ca.cert));
  });
}

function issue(ca: Authority, pair: CertAndKey, leaf: Leaf, renew: boolean): Promise<void> {
  return ensureLeaf(ca, pair.cert, pair.key, leaf, renew);
}

import assert from 'node:assert/strict';
import { X509Certificate, createPrivateKey, createPublicKey } from 'node:crypto';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { after, test } from 'node:test';
import { issueKubernetesCluster, issueKubernetesMachine, rotateKubernetesAuthorities } from '../../src/adapters/pki/kubernetes-pki.ts';
import { etcdAuthority, rotateAuthority } from '../../src/adapters/pki/local-pki.ts';
import type { CertAndKey } from '../../src/adapters/pki/pki-files.ts';

// The Kubernetes PKI on its own, without the record store: what kubernetes-pki.ts writes in a cluster's folder.
const dirs: string[] = [];
after(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function clusterDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fastplane-kubernetes-pki-'));
  dirs.push(dir);
  return dir;
}

/** Every file under `dir` (locks aside) and its content. */
function contents(dir: string): Map<string, string> {
  const files = readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile() && !e.name.endsWith('.lock'));
  return new Map(files.map((e) => [relative(dir, join(e.parentPath, e.name)), readFileSync(join(e.parentPath, e.name), 'utf8')]));
}

const cert = (file: string): X509Certificate => new X509Certificate(readFileSync(file));
const signedBy = (pair: CertAndKey, caFile: string): boolean => cert(pair.cert).verify(cert(caFile).publicKey);

test('a second issue changes nothing, and every private key is readable by its owner only', async () => {
  const dir = clusterDir();
  const files = await issueKubernetesMachine(dir, 'm1', '127.30.1.1', '127.31.0.1');
  const first = contents(dir);
  await issueKubernetesMachine(dir, 'm1', '127.30.1.1', '127.31.0.1');
  assert.deepEqual(contents(dir), first);
  for (const key of [files.ca.key, files.frontProxyCa.key, files.serviceAccount.key, files.apiserver.key, files.apiserverEtcdClient.key, files.clients.admin.key]) {
    assert.equal(statSync(key).mode & 0o777, 0o600, key);
  }
});

test('each certificate has the subject and the issuer kubeadm gives it; the etcd client chains to the etcd CA', async () => {
  const dir = clusterDir();
  const files = await issueKubernetesMachine(dir, 'm1', '127.30.1.1', undefined);
  assert.ok(signedBy(files.apiserver, files.ca.cert));
  assert.ok(signedBy(files.apiserverEtcdClient, files.etcdCa));
  assert.ok(!signedBy(files.apiserverEtcdClient, files.ca.cert));
  assert.ok(signedBy(files.frontProxyClient, files.frontProxyCa.cert));
  assert.notEqual(readFileSync(files.ca.cert, 'utf8'), readFileSync(files.etcdCa, 'utf8'));
  assert.equal(cert(files.clients.admin.cert).subject, 'O=system:masters\nCN=kubernetes-admin');
  assert.equal(cert(files.clients['controller-manager'].cert).subject, 'CN=system:kube-controller-manager');
  assert.equal(cert(files.clients.scheduler.cert).subject, 'CN=system:kube-scheduler');
  assert.equal(cert(files.frontProxyClient.cert).subject, 'CN=front-proxy-client');
  for (const client of Object.values(files.clients)) assert.ok(signedBy(client, files.ca.cert));
  // No endpoint known: the machine's address, 127.0.0.1 and the service IP only.
  assert.equal(
    cert(files.apiserver.cert).subjectAltName,
    'IP Address:127.30.1.1, IP Address:127.0.0.1, IP Address:10.96.0.1, DNS:kubernetes, DNS:kubernetes.default, DNS:kubernetes.default.svc, DNS:kubernetes.default.svc.cluster.local',
  );
});

test('the service-account key pair is one ECDSA P-256 pair', async () => {
  const files = await issueKubernetesMachine(clusterDir(), 'm1', '127.30.1.1', undefined);
  const pub = createPublicKey(readFileSync(files.serviceAccount.pub));
  assert.equal(pub.asymmetricKeyDetails?.namedCurve, 'prime256v1');
  const fromPrivate = createPublicKey(createPrivateKey(readFileSync(files.serviceAccount.key)));
  assert.ok(fromPrivate.equals(pub));
});

test('a moved endpoint re-issues the apiserver certificate only; another machine shares the cluster files', async () => {
  const dir = clusterDir();
  const before = await issueKubernetesMachine(dir, 'm1', '127.30.1.1', '127.31.0.1');
  const ca = readFileSync(before.ca.cert, 'utf8');
  const old = readFileSync(before.apiserver.cert, 'utf8');
  const after = await issueKubernetesMachine(dir, 'm1', '127.30.1.1', '127.31.0.2');
  assert.notEqual(readFileSync(after.apiserver.cert, 'utf8'), old);
  assert.match(cert(after.apiserver.cert).subjectAltName ?? '', /IP Address:127\.31\.0\.2,/);
  assert.doesNotMatch(cert(after.apiserver.cert).subjectAltName ?? '', /127\.31\.0\.1,/);
  assert.equal(readFileSync(after.ca.cert, 'utf8'), ca);

  const other = await issueKubernetesMachine(dir, 'm2', '127.30.1.2', '127.31.0.2');
  assert.equal(other.serviceAccount.key, after.serviceAccount.key);
  assert.notEqual(other.apiserver.cert, after.apiserver.cert);
  assert.match(cert(other.apiserver.cert).subjectAltName ?? '', /^IP Address:127\.30\.1\.2,/);
});

test("renewal: the cluster's leaves anew (the etcd client still from the etcd CA), the CAs and the service-account key kept; a machine's renewal is its serving certificate only", async () => {
  const dir = clusterDir();
  const files = await issueKubernetesMachine(dir, 'm1', '127.30.1.1', '127.31.0.1');
  const before = contents(dir);
  const changed = (): string[] => [...contents(dir)].filter(([file, text]) => before.get(file) !== text).map(([file]) => file).sort();
  await issueKubernetesMachine(dir, 'm1', '127.30.1.1', '127.31.0.1', { renew: true });
  assert.deepEqual(changed(), ['machines/m1/kubernetes/apiserver.crt', 'machines/m1/kubernetes/apiserver.key']);
  await issueKubernetesCluster(dir, { renew: true });
  const leaves = ['admin', 'apiserver-etcd-client', 'controller-manager', 'front-proxy-client', 'scheduler'].flatMap((name) => [`kubernetes/pki/${name}.crt`, `kubernetes/pki/${name}.key`]);
  assert.deepEqual(changed(), ['machines/m1/kubernetes/apiserver.crt', 'machines/m1/kubernetes/apiserver.key', ...leaves].sort());
  assert.ok(signedBy(files.apiserverEtcdClient, files.etcdCa), 'apiserver-etcd-client is signed by the etcd CA');
  assert.ok(signedBy(files.frontProxyClient, files.frontProxyCa.cert));
  assert.ok(signedBy(files.clients.admin, files.ca.cert));
});

test('during an etcd CA rotation the apiserver etcd client may come from the CA being brought in', async () => {
  const dir = clusterDir();
  const files = await issueKubernetesMachine(dir, 'm1', '127.30.1.1', undefined);
  const etcdPki = dirname(files.etcdCa);
  await assert.rejects(issueKubernetesCluster(dir, { renew: true, nextEtcdCa: true }), /no CA rotation in progress/);
  await rotateAuthority(etcdAuthority(etcdPki), 'trust');
  await issueKubernetesCluster(dir, { renew: true, nextEtcdCa: true });
  assert.ok(signedBy(files.apiserverEtcdClient, join(etcdPki, 'ca-next.crt')), 'signed by the next etcd CA');
  assert.ok(!cert(files.apiserverEtcdClient.cert).verify(cert(files.etcdCa).publicKey), 'not by the current one');
  assert.ok(signedBy(files.clients.admin, files.ca.cert), 'the Kubernetes clients from the Kubernetes CA as ever');
});

/** Every certificate of a PEM bundle file. */
const bundle = (file: string): X509Certificate[] => readFileSync(file, 'utf8').split(/(?=-----BEGIN CERTIFICATE-----)/).map((pem) => new X509Certificate(pem));
const trusts = (caFile: string, pair: CertAndKey): boolean => bundle(caFile).some((ca) => cert(pair.cert).verify(ca.publicKey));

test('a Kubernetes CA rotation: both CAs trusted, then leaves from the new ones, then the new ones alone; the signer file always one certificate, the service-account key kept', async () => {
  const dir = clusterDir();
  const files = await issueKubernetesMachine(dir, 'm1', '127.30.1.1', undefined);
  const oldCa = cert(files.ca.cert);
  const serviceAccount = readFileSync(files.serviceAccount.key, 'utf8');
  const oldAdmin = { cert: join(dir, 'old-admin.crt'), key: files.clients.admin.key };
  writeFileSync(oldAdmin.cert, readFileSync(files.clients.admin.cert));
  assert.equal(readFileSync(files.caSigner, 'utf8').trim(), readFileSync(files.ca.cert, 'utf8').trim(), 'outside a rotation the signer is the CA');

  await rotateKubernetesAuthorities(dir, 'trust');
  assert.equal(bundle(files.ca.cert).length, 2);
  assert.equal(bundle(files.frontProxyCa.cert).length, 2);
  assert.equal(bundle(files.caSigner).length, 1);
  assert.ok(cert(files.caSigner).verify(oldCa.publicKey), 'the old CA signs until the second phase');

  await rotateKubernetesAuthorities(dir, 'reissue');
  const newCa = bundle(files.ca.cert)[0];
  assert.ok(newCa !== undefined && newCa.subject !== oldCa.subject, 'the new CA first in the bundle');
  assert.ok(cert(files.caSigner).verify(newCa.publicKey) && bundle(files.caSigner).length === 1, 'the signer is the new CA alone');
  await issueKubernetesMachine(dir, 'm1', '127.30.1.1', undefined, { renew: true });
  await issueKubernetesCluster(dir, { renew: true });
  for (const pair of [files.apiserver, files.clients.admin, files.clients['controller-manager'], files.clients.scheduler]) assert.ok(cert(pair.cert).verify(newCa.publicKey), `${pair.cert} from the new CA`);
  assert.equal(cert(files.frontProxyClient.cert).issuer, bundle(files.frontProxyCa.cert)[0]?.subject, 'front-proxy-client from the new front-proxy CA');
  assert.ok(trusts(files.ca.cert, oldAdmin), 'a client of the old CA is still trusted until the last phase');

  await rotateKubernetesAuthorities(dir, undefined);
  assert.equal(bundle(files.ca.cert).length, 1);
  assert.equal(bundle(files.frontProxyCa.cert).length, 1);
  assert.ok(!trusts(files.ca.cert, oldAdmin), 'a client of the old CA is trusted no more');
  assert.ok(trusts(files.ca.cert, files.clients.admin));
  assert.ok(trusts(files.frontProxyCa.cert, files.frontProxyClient));
  assert.equal(readFileSync(files.serviceAccount.key, 'utf8'), serviceAccount, 'the service-account key is no CA and stays');
  assert.deepEqual(readdirSync(dirname(files.ca.cert)).filter((name) => name.includes('-next')), [], 'no next CA left');
});

test('an etcd-only cluster has no Kubernetes CA to rotate, and a rotation begun without one carries on without one', async () => {
  const dir = clusterDir();
  await rotateKubernetesAuthorities(dir, 'trust');
  assert.deepEqual(readdirSync(dir), []);
  const files = await issueKubernetesMachine(dir, 'm1', '127.30.1.1', undefined);
  const ca = readFileSync(files.ca.cert, 'utf8');
  await rotateKubernetesAuthorities(dir, 'reissue');
  await rotateKubernetesAuthorities(dir, 'drop');
  assert.equal(readFileSync(files.ca.cert, 'utf8'), ca);
});

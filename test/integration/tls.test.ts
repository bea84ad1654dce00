import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Etcd3Admin, openKvClient, readTlsCredentials, type TlsCredentials } from '../../src/adapters/etcd/etcd3-admin.ts';
import { listEtcdVersions } from '../../src/adapters/etcd/etcd-binaries.ts';
import { issueMemberCertificates } from '../../src/adapters/pki/local-pki.ts';
import { clientTlsFiles, memberTlsFiles } from '../../src/adapters/pki/pki-files.ts';
import { LocalProcessProvider } from '../../src/adapters/providers/local/local-process-provider.ts';

const PREFIX = '127.80';
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1';
const CLIENT_AUTH = '1.3.6.1.5.5.7.3.2';
const dirs: string[] = [];
const clusters: { provider: LocalProcessProvider; cluster: string }[] = [];

after(async () => {
  // destroyCluster stops every member by its PID.
  for (const { provider, cluster } of clusters) await provider.destroyCluster(cluster);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fastplane-tls-'));
  dirs.push(dir);
  return dir;
}

function newCluster(cluster: string): { provider: LocalProcessProvider; stateDir: string } {
  const stateDir = tempDir();
  const provider = new LocalProcessProvider({ stateDir, addressPrefix: PREFIX, stopGraceMs: 1000 });
  clusters.push({ provider, cluster });
  return { provider, stateDir };
}

async function waitFor<T>(what: string, probe: () => Promise<T>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await probe();
    } catch (error) {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

const read = (file: string): X509Certificate => new X509Certificate(readFileSync(file));
const modeOf = (file: string): number => statSync(file).mode & 0o777;

/** Reads a key through a fresh client with these credentials (or none: plain http). */
async function kvGet(url: string, credentials: TlsCredentials | undefined): Promise<string | null> {
  const kv = openKvClient([url], { callTimeoutMs: 2000, credentials });
  try {
    return await kv.get('/tls').string();
  } finally {
    kv.close();
  }
}

/** GET /members on a peer port (etcd's peer HTTP API) with these credentials; resolves to the status code. */
function peerGet(peerURL: string, credentials: TlsCredentials): Promise<number> {
  const url = new URL('/members', peerURL);
  return new Promise((resolve, reject) => {
    const req = request(
      { hostname: url.hostname, port: url.port, path: url.pathname, ca: credentials.rootCertificate, cert: credentials.certChain, key: credentials.privateKey, timeout: 2000 },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
    req.end();
  });
}

test('a cluster gets one CA even when its machines are created in parallel; member certificates name the member IP; keys are 0600', async () => {
  const { provider, stateDir } = newCluster('pki');
  const infras = await Promise.all([1, 2, 3].map((ordinal) => provider.create({ cluster: 'pki', name: `m${String(ordinal)}`, ordinal })));
  const pkiDir = join(stateDir, 'clusters', 'pki', 'pki');
  const client = provider.clientTls('pki');
  assert.deepEqual(client, clientTlsFiles(join(stateDir, 'clusters', 'pki', 'current', 'pki')), 'the newest stored generation, as this host last saw it');
  const caPem = readFileSync(client.caFile, 'utf8');
  const ca = read(client.caFile);
  assert.equal(ca.ca, true);
  assert.equal(ca.publicKey.asymmetricKeyDetails?.namedCurve, 'prime256v1', 'ECDSA P-256');

  const keys = [join(pkiDir, 'ca.key'), client.keyFile];
  for (const infra of infras) {
    assert.equal(infra.clientURL, `https://${infra.address}:2379`);
    assert.equal(infra.peerURL, `https://${infra.address}:2380`);
    const files = memberTlsFiles(pkiDir, join(stateDir, 'clusters', 'pki', 'machines', infra.name, 'pki'));
    for (const certFile of [files.certFile, files.peerCertFile]) {
      const cert = read(certFile);
      assert.ok(cert.verify(ca.publicKey), `${certFile} is signed by the cluster's one CA`);
      assert.equal(cert.subjectAltName, `IP Address:${infra.address}, IP Address:127.0.0.1`);
      assert.deepEqual([...cert.keyUsage].sort(), [SERVER_AUTH, CLIENT_AUTH]);
      assert.equal(cert.ca, false);
    }
    keys.push(files.keyFile, files.peerKeyFile);
  }
  const clientCert = read(client.certFile);
  assert.ok(clientCert.verify(ca.publicKey));
  assert.deepEqual(clientCert.keyUsage, [CLIENT_AUTH]);
  for (const key of keys) assert.equal(modeOf(key).toString(8), '600', `${key} is private`);

  // Re-running creation, and creating the next machine, reuse the CA and the existing certificates.
  const serverPem = readFileSync(memberTlsFiles(pkiDir, join(stateDir, 'clusters', 'pki', 'machines', 'm1', 'pki')).certFile, 'utf8');
  await provider.create({ cluster: 'pki', name: 'm1', ordinal: 1 });
  await provider.create({ cluster: 'pki', name: 'm4', ordinal: 4 });
  assert.equal(readFileSync(client.caFile, 'utf8'), caPem, 'the CA is not regenerated');
  assert.equal(readFileSync(memberTlsFiles(pkiDir, join(stateDir, 'clusters', 'pki', 'machines', 'm1', 'pki')).certFile, 'utf8'), serverPem);
  assert.ok(read(memberTlsFiles(pkiDir, join(stateDir, 'clusters', 'pki', 'machines', 'm4', 'pki')).certFile).verify(ca.publicKey));
});

test('an insecure provider creates http machines without certificates', async () => {
  const stateDir = tempDir();
  const provider = new LocalProcessProvider({ stateDir, addressPrefix: PREFIX, insecure: true });
  clusters.push({ provider, cluster: 'plain' });
  const infra = await provider.create({ cluster: 'plain', name: 'm1', ordinal: 1 });
  assert.equal(infra.clientURL, `http://${infra.address}:2379`);
  assert.equal(infra.peerURL, `http://${infra.address}:2380`);
  assert.equal(provider.clientTls('plain'), undefined);
  assert.throws(() => statSync(join(stateDir, 'clusters', 'plain', 'pki')), /ENOENT/);
});

const versions = ['3.4.23', ...listEtcdVersions().filter((version) => version.startsWith('3.5.')).slice(0, 1)];
for (const version of versions) {
  test(`etcd ${version} with client and peer certificate auth: fastplane's client certificate works; none, or another CA's, is refused`, async () => {
    const cluster = `v${version.replaceAll('.', '-')}`;
    const { provider } = newCluster(cluster);
    const infra = await provider.create({ cluster, name: 'm1', ordinal: 1 });
    await provider.startMember(cluster, 'm1', { memberName: 'm1', version, initialCluster: `m1=${infra.peerURL}`, initialClusterState: 'new', clusterToken: cluster, maxLearners: 1 });
    const ours = readTlsCredentials(provider.clientTls(cluster)!);
    const admin = new Etcd3Admin({ callTimeoutMs: 2000, credentials: () => ours });
    try {
      const status = await waitFor('etcd to answer over TLS', () => admin.status(infra.clientURL));
      assert.equal(status.version, version);
      const kv = openKvClient([infra.clientURL], { credentials: ours });
      try {
        await kv.put('/tls').value('ok');
      } finally {
        kv.close();
      }
      assert.equal(await kvGet(infra.clientURL, ours), 'ok');

      const foreignDir = tempDir();
      await issueMemberCertificates(join(foreignDir, 'pki'), join(foreignDir, 'member'), 'other', '127.0.0.1');
      // Another CA's client certificate, presented to a server the client does trust.
      const foreign = { ...readTlsCredentials(clientTlsFiles(join(foreignDir, 'pki'))), rootCertificate: ours.rootCertificate };
      const noCertificate = { rootCertificate: ours.rootCertificate };
      // etcd 3.4 answers both with "bad certificate", 3.5 with "certificate required" and "unknown ca".
      const refused = /alert (bad certificate|certificate required|unknown ca)/;
      await assert.rejects(kvGet(infra.clientURL, noCertificate), refused, 'no client certificate');
      await assert.rejects(kvGet(infra.clientURL, foreign), refused, "another CA's client certificate");
      await assert.rejects(kvGet(infra.clientURL.replace('https:', 'http:'), undefined), /UNAVAILABLE/, 'plain http');

      assert.equal(await peerGet(infra.peerURL, ours), 200, 'the peer port takes a certificate of the cluster CA');
      await assert.rejects(peerGet(infra.peerURL, noCertificate), refused, 'the peer port refuses a client without a certificate');
      await assert.rejects(peerGet(infra.peerURL, foreign), refused, "the peer port refuses another CA's certificate");
    } finally {
      await admin.close();
      // Each state dir starts at the same addresses: the next version's member needs them free.
      await provider.destroyCluster(cluster);
    }
  });
}

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import type { CertificateInfo } from '../../src/ports/care.ts';
import { cliEnvFactory, statusOf, type CliEnv } from '../support/cli.ts';
import { EndpointReader, EndpointWriter, kubectlFor, TEST_KUBERNETES, type Kubectl } from '../support/kubectl.ts';

// Certificate renewal and etcd CA rotation on a Kubernetes control plane: real etcd, kube-apiserver,
// controller-manager, scheduler and HAProxy, with a writer and a reader through the endpoint throughout.

const newEnv = cliEnvFactory();
const DAY_MS = 86_400_000;
const SHORT_DAYS = 41;

interface Named {
  items: { metadata: { name: string } }[];
}

function certs(stdout: string): Map<string, CertificateInfo> {
  return new Map((JSON.parse(stdout) as CertificateInfo[]).map((c) => [c.file, c]));
}

/** The Kubernetes leaf certificates of a listing: under kubernetes/ (not the CAs). */
function kubernetesLeaves(list: Map<string, CertificateInfo>): CertificateInfo[] {
  return [...list.values()].filter((c) => c.file.includes('/kubernetes/') && !/ca\.crt$/.test(c.file));
}

/** The serving certificate an apiserver presents, as openssl reads it: its expiry. */
function servedNotAfter(address: string): number {
  const pem = execFileSync('openssl', ['s_client', '-connect', address], { input: '', stdio: ['pipe', 'pipe', 'ignore'] }).toString();
  const text = execFileSync('openssl', ['x509', '-noout', '-enddate'], { input: pem }).toString();
  return Date.parse(/notAfter=(.*)/.exec(text)?.[1] ?? '');
}

function issuerOf(file: string): string {
  return execFileSync('openssl', ['x509', '-noout', '-issuer', '-in', file]).toString().trim();
}

/** openssl's own chain check of `cert` against the CA file alone. */
function chainsTo(caFile: string, cert: string): boolean {
  try {
    execFileSync('openssl', ['verify', '-CAfile', caFile, cert], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/** A writer and a reader through the endpoint while `work` runs; what they saw. */
async function underLoad(endpoint: Kubectl, namespace: string, work: () => Promise<void>): Promise<{ writer: EndpointWriter; reader: EndpointReader; ms: number }> {
  await endpoint.run(['create', 'namespace', namespace]);
  const writer = new EndpointWriter(endpoint, namespace);
  const reader = new EndpointReader(endpoint);
  const running = [writer.run(), reader.run()];
  const started = Date.now();
  try {
    await work();
  } finally {
    writer.stop();
    reader.stop();
    await Promise.all(running);
  }
  return { writer, reader, ms: Date.now() - started };
}

async function lostWrites(endpoint: Kubectl, namespace: string, writer: EndpointWriter): Promise<string[]> {
  const stored = new Set((await endpoint.json<Named>(['get', 'configmaps', '-n', namespace])).items.map((item) => item.metadata.name));
  return writer.acked.filter((name) => !stored.has(name));
}

function describeLoad({ writer, reader, ms }: { writer: EndpointWriter; reader: EndpointReader; ms: number }): string {
  const window = reader.failures.length === 0 ? 'none' : `${String(Math.max(...reader.failures) - Math.min(...reader.failures))} ms from first to last`;
  return `${String(ms)} ms; writes acknowledged ${String(writer.acked.length)}, failed ${String(writer.failures)}, longest failed-write window ${String(writer.longestOutageMs)} ms; /readyz reads ok ${String(reader.ok)}, failed ${String(reader.failures.length)} (failed-read window ${window})${writer.lastError === undefined ? '' : `; last write failure: ${writer.lastError}`}`;
}

describe('certificates of a Kubernetes control plane', { timeout: 600_000 }, () => {
  let env: CliEnv;
  let endpoint: Kubectl;
  let machines: string[];

  before(async () => {
    env = newEnv('127.34');
    // Short-lived (about 41 days) yet outside the 30-day window, so the loop leaves them to `certs renew`.
    const up = await env.run(['up', '--name', 'kc', '--replicas', '3', '--kubernetes', TEST_KUBERNETES, '--timeout', '240s', '-o', 'json'], { FASTPLANE_CERT_VALIDITY: `${String(SHORT_DAYS * 24)}h` });
    assert.equal(up.code, 0, up.stderr);
    machines = statusOf(up.stdout).status.machines.map((m) => m.name);
    endpoint = await kubectlFor(env, 'kc');
  });

  test('the certificate listing holds the Kubernetes certificates, short-lived as issued', async () => {
    const leaves = kubernetesLeaves(certs((await env.run(['certs', 'kc', '-o', 'json'])).stdout));
    const names = leaves.map((c) => c.file.split('/').slice(-1)[0]).sort();
    assert.deepEqual(names, ['admin.crt', 'apiserver-etcd-client.crt', 'apiserver.crt', 'apiserver.crt', 'apiserver.crt', 'controller-manager.crt', 'front-proxy-client.crt', 'scheduler.crt']);
    for (const cert of leaves) assert.ok(Date.parse(cert.notAfter) < Date.now() + (SHORT_DAYS + 1) * DAY_MS, `${cert.file} is short-lived`);
  });

  test('certs renew: every Kubernetes certificate lasts a year, served too; no acknowledged write lost, the endpoint ready throughout', async (t) => {
    const list = async (): Promise<Map<string, CertificateInfo>> => certs((await env.run(['certs', 'kc', '-o', 'json'])).stdout);
    const old = await list();
    const load = await underLoad(endpoint, 'renew', async () => {
      const renew = await env.run(['certs', 'renew', 'kc']);
      assert.equal(renew.code, 0, renew.stderr);
    });
    t.diagnostic(`certs renew: ${describeLoad(load)}`);
    const renewed = await list();
    for (const cert of kubernetesLeaves(renewed)) {
      const before = old.get(cert.file);
      assert.ok(before !== undefined, cert.file);
      assert.ok(Date.parse(cert.notAfter) > Date.parse(before.notAfter) + 300 * DAY_MS, `${cert.file}: ${before.notAfter} -> ${cert.notAfter}`);
    }
    for (const machine of machines) {
      const address = (await env.run(['kubeconfig', 'kc', '--machine', machine])).stdout.match(/server: https:\/\/(\S+)/)?.[1] ?? '';
      assert.ok(servedNotAfter(address) > Date.now() + 300 * DAY_MS, `${machine}'s apiserver serves its renewed certificate`);
    }
    assert.deepEqual(await lostWrites(endpoint, 'renew', load.writer), [], 'every acknowledged object is stored');
    assert.ok(load.writer.acked.length >= 10, 'the writer kept writing');
    assert.deepEqual(load.reader.failures, [], 'every /readyz read through the endpoint answered');
    const status = statusOf((await env.run(['status', 'kc', '-o', 'json'])).stdout);
    assert.equal(status.status.conditions.find((c) => c.type === 'CertificatesExpiringSoon')?.status, 'False');
    assert.equal(status.status.conditions.find((c) => c.type === 'ControlPlaneComponentsHealthy')?.status, 'True');
  });

  test('certs renew --ca: the apiservers still serve, with an etcd client certificate of the new etcd CA', async (t) => {
    const listed = [...certs((await env.run(['certs', 'kc', '-o', 'json'])).stdout).keys()];
    const etcdClient = listed.find((file) => file.endsWith('/apiserver-etcd-client.crt'));
    const etcdCa = listed.find((file) => file.endsWith('/pki/ca.crt') && !file.includes('/kubernetes/'));
    assert.ok(etcdClient !== undefined && etcdCa !== undefined, `the listing names the etcd CA and the apiserver's etcd client: ${listed.join(', ')}`);
    const oldIssuer = issuerOf(etcdClient);
    const load = await underLoad(endpoint, 'rotate', async () => {
      const rotate = await env.run(['certs', 'renew', 'kc', '--ca']);
      assert.equal(rotate.code, 0, rotate.stderr);
    });
    t.diagnostic(`certs renew --ca: ${describeLoad(load)}`);
    assert.notEqual(issuerOf(etcdClient), oldIssuer, 'apiserver-etcd-client comes from the new etcd CA');
    assert.ok(chainsTo(etcdCa, etcdClient), 'apiserver-etcd-client chains to the etcd CA file, now the new CA alone');
    // etcd now trusts the new CA only: an apiserver that writes shows etcd a certificate of the new CA.
    for (const machine of machines) {
      const direct = await kubectlFor(env, 'kc', machine);
      assert.equal((await direct.run(['get', '--raw', '/readyz'])).trim(), 'ok', `${machine}'s apiserver is ready`);
      await direct.run(['create', 'configmap', `after-rotation-${machine}`, '-n', 'rotate']);
    }
    assert.deepEqual(await lostWrites(endpoint, 'rotate', load.writer), [], 'every acknowledged object is stored');
    assert.deepEqual(load.reader.failures, [], 'every /readyz read through the endpoint answered');
  });

  after(async () => {
    const down = await env.run(['down', 'kc']);
    assert.equal(down.code, 0, down.stderr);
  });
});

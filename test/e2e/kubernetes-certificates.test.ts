import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { getText } from '../../src/adapters/host/http-probe.ts';
import type { CertificateInfo } from '../../src/ports/care.ts';
import { cliEnvFactory, statusOf, type CliEnv } from '../support/cli.ts';
import { EndpointReader, EndpointWriter, kubeconfigCredentials } from '../support/endpoint-traffic.ts';
import { kubectlFor, TEST_KUBERNETES, type Kubectl, type Named } from '../support/kubectl.ts';

// Certificate renewal and CA rotation (etcd's, Kubernetes' and the front-proxy's) on a Kubernetes
// control plane: real etcd, kube-apiserver, controller-manager, scheduler and HAProxy, with a writer
// and a reader through the endpoint throughout.

const newEnv = cliEnvFactory();
const DAY_MS = 86_400_000;
const SHORT_DAYS = 41;

function certs(stdout: string): Map<string, CertificateInfo> {
  return new Map((JSON.parse(stdout) as CertificateInfo[]).map((c) => [c.file, c]));
}

/** The Kubernetes leaf certificates of a listing: under kubernetes/ (not the CAs). */
function kubernetesLeaves(list: Map<string, CertificateInfo>): CertificateInfo[] {
  return [...list.values()].filter((c) => c.file.includes('/kubernetes/') && !/ca\.crt$/.test(c.file));
}

/** The serving certificate an apiserver presents, as openssl reads it. */
function servedPem(address: string): string {
  return execFileSync('openssl', ['s_client', '-connect', address], { input: '', stdio: ['pipe', 'pipe', 'ignore'] }).toString();
}

/** The serving certificate's expiry. */
function servedNotAfter(address: string): number {
  const text = execFileSync('openssl', ['x509', '-noout', '-enddate'], { input: servedPem(address) }).toString();
  return Date.parse(/notAfter=(.*)/.exec(text)?.[1] ?? '');
}

const certificateCount = (pem: string): number => pem.match(/BEGIN CERTIFICATE/g)?.length ?? 0;

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
    env = newEnv('127.62');
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

  test('certs renew --ca: every CA rotated with no outage for a client that fetches its kubeconfig again; the old Kubernetes CA trusted no more', async (t) => {
    const listed = [...certs((await env.run(['certs', 'kc', '-o', 'json'])).stdout).keys()];
    const named = (suffix: string, kubernetes: boolean): string => {
      const file = listed.find((f) => f.endsWith(suffix) && f.includes('/kubernetes/') === kubernetes);
      assert.ok(file !== undefined, `the listing names ${suffix}: ${listed.join(', ')}`);
      return file;
    };
    const [etcdClient, etcdCa, kubernetesCa, frontProxyCa, frontProxyClient] = [named('/apiserver-etcd-client.crt', true), named('/pki/ca.crt', false), named('/kubernetes/pki/ca.crt', true), named('/front-proxy-ca.crt', true), named('/front-proxy-client.crt', true)];
    const oldIssuer = issuerOf(etcdClient);
    const [oldKubernetesCa, oldFrontProxyCa] = [readFileSync(kubernetesCa, 'utf8'), readFileSync(frontProxyCa, 'utf8')];
    // A client certificate of the old Kubernetes CA, valid for months yet: the one the endpoint's kubeconfig was printed with.
    const oldClient = kubeconfigCredentials(readFileSync(endpoint.kubeconfig, 'utf8'));
    let refetched = 0;
    const refetchFailures: string[] = [];
    const load = await underLoad(endpoint, 'rotate', async () => {
      // The writer and the reader follow the rotation as a user would: `fastplane kubeconfig` again now and then.
      const rotation = { running: true };
      const refetching = (async (): Promise<void> => {
        while (rotation.running) {
          const printed = await env.run(['kubeconfig', 'kc']);
          if (printed.code === 0) {
            writeFileSync(`${endpoint.kubeconfig}.next`, printed.stdout, { mode: 0o600 });
            renameSync(`${endpoint.kubeconfig}.next`, endpoint.kubeconfig);
            refetched++;
          } else refetchFailures.push(printed.stderr);
          await new Promise((resolve) => setTimeout(resolve, 3_000));
        }
      })();
      try {
        const rotate = await env.run(['certs', 'renew', 'kc', '--ca']);
        assert.equal(rotate.code, 0, rotate.stderr);
      } finally {
        rotation.running = false;
        await refetching;
      }
    });
    const rotated = Date.now();
    t.diagnostic(`certs renew --ca: ${describeLoad(load)}; kubeconfig fetched ${String(refetched)} times`);
    assert.deepEqual(refetchFailures, [], 'fastplane kubeconfig answered throughout');
    assert.notEqual(issuerOf(etcdClient), oldIssuer, 'apiserver-etcd-client comes from the new etcd CA');
    assert.ok(chainsTo(etcdCa, etcdClient), 'apiserver-etcd-client chains to the etcd CA file, now the new CA alone');

    const [newKubernetesCa, newFrontProxyCa] = [readFileSync(kubernetesCa, 'utf8'), readFileSync(frontProxyCa, 'utf8')];
    assert.ok(newKubernetesCa !== oldKubernetesCa && certificateCount(newKubernetesCa) === 1, 'a new Kubernetes CA, alone in its file');
    assert.ok(newFrontProxyCa !== oldFrontProxyCa && certificateCount(newFrontProxyCa) === 1, 'a new front-proxy CA, alone in its file');
    assert.ok(chainsTo(frontProxyCa, frontProxyClient), 'front-proxy-client chains to the new front-proxy CA');
    const scratch = (name: string, text: string): string => {
      const file = join(env.stateDir, name);
      writeFileSync(file, text, { mode: 0o600 });
      return file;
    };
    const kubeconfigs = [['admin', (await env.run(['kubeconfig', 'kc'])).stdout], ...machines.flatMap((m) => ['kube-controller-manager', 'kube-scheduler'].map((c) => [`${m} ${c}`, readFileSync(join(env.stateDir, 'clusters', 'kc', 'machines', m, `${c}.conf`), 'utf8')]))];
    for (const [who, text = ''] of kubeconfigs) {
      const { ca, cert } = kubeconfigCredentials(text);
      assert.equal(ca.trim(), newKubernetesCa.trim(), `${String(who)}'s kubeconfig trusts the new CA alone`);
      assert.ok(chainsTo(kubernetesCa, scratch('client.crt', cert)), `${String(who)}'s client certificate chains to the new CA`);
    }
    const oldFiles = { caFile: kubernetesCa, certFile: scratch('old-client.crt', oldClient.cert), keyFile: scratch('old-client.key', oldClient.key) };
    for (const machine of machines) {
      const address = (await env.run(['kubeconfig', 'kc', '--machine', machine])).stdout.match(/server: https:\/\/(\S+)/)?.[1] ?? '';
      assert.ok(chainsTo(kubernetesCa, scratch('served.crt', servedPem(address))), `${machine}'s apiserver serves a certificate of the new CA`);
      // The apiserver checks a client certificate against its --client-ca-file, the new CA alone now.
      const refused = await getText(`https://${address}/api/v1/namespaces`, { kind: 'client', files: oldFiles }, 10_000);
      assert.equal(refused.status, 401, `${machine}'s apiserver refuses a client certificate of the old CA: ${refused.body}`);
      // etcd now trusts the new CA only: an apiserver that writes shows etcd a certificate of the new CA.
      const direct = await kubectlFor(env, 'kc', machine);
      assert.equal((await direct.run(['get', '--raw', '/readyz'])).trim(), 'ok', `${machine}'s apiserver is ready`);
      await direct.run(['create', 'configmap', `after-rotation-${machine}`, '-n', 'rotate']);
    }
    // Leader election goes on under the new certificates: each Lease has a holder that renewed it since.
    for (const lease of ['kube-controller-manager', 'kube-scheduler']) {
      let spec: { holderIdentity?: string; renewTime?: string } = {};
      for (let i = 0; i < 60 && !(Date.parse(spec.renewTime ?? '') > rotated); i++) {
        if (i > 0) await new Promise((resolve) => setTimeout(resolve, 1_000));
        spec = (await endpoint.json<{ spec: typeof spec }>(['get', 'lease', '-n', 'kube-system', lease])).spec;
      }
      assert.ok(spec.holderIdentity !== undefined && spec.holderIdentity !== '', `${lease} has a leader`);
      assert.ok(Date.parse(spec.renewTime ?? '') > rotated, `${lease} renewed after the rotation: ${JSON.stringify(spec)}`);
    }
    assert.deepEqual(await lostWrites(endpoint, 'rotate', load.writer), [], 'every acknowledged object is stored');
    assert.deepEqual(load.reader.failures, [], 'every /readyz read through the endpoint answered');
    assert.equal(load.writer.failures, 0, `no write failed${load.writer.lastError === undefined ? '' : `: ${load.writer.lastError}`}`);
  });

  after(async () => {
    const down = await env.run(['down', 'kc']);
    assert.equal(down.code, 0, down.stderr);
  });
});

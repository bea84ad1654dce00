import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, test } from 'node:test';
import { parse } from 'yaml';
import { findKubernetesProgram } from '../../src/adapters/kubernetes/kubernetes-binaries.ts';
import { describeCertificate } from '../../src/adapters/pki/local-pki.ts';
import { subjectAltNames } from '../../src/adapters/pki/x509-certificates.ts';
import { LocalProcessProvider } from '../../src/adapters/providers/local/local-process-provider.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import { isRunning } from '../support/cli.ts';
import { KUBERNETES_COMPONENTS, type ComponentHealth, type KubernetesComponent, type MachineComponent, type MachineComponents } from '../../src/ports/machine-provider.ts';

// One machine stacked as kubeadm does it, with real programs: its etcd member, then kube-apiserver,
// kube-controller-manager and kube-scheduler, reached with the built kubectl.
const PREFIX = '127.30';
const KUBERNETES = '1.36.3';
// kubeadm pairs 1.36 with etcd 3.6 (src/api/kcp/etcd-versions.ts); the newest 3.6 installed.
const ETCD = '3.6.17';
const ENDPOINT = '127.31.0.1:6443';
const CLUSTER = 'kube';
const run = promisify(execFile);

const store = new MemoryStateStore();
const dirs: string[] = [];
const newDir = (): string => {
  const dir = mkdtempSync(join(tmpdir(), 'fastplane-kubernetes-'));
  dirs.push(dir);
  return dir;
};
const stateDir = newDir();
const provider = new LocalProcessProvider({ stateDir, addressPrefix: PREFIX, stopGraceMs: 5000, store });

after(async () => {
  // destroyCluster stops every component and member of the cluster by its PID.
  await provider.destroyCluster(CLUSTER);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const machineDir = (name: string): string => join(stateDir, 'clusters', CLUSTER, 'machines', name);

function recordedPid(name: string, kind: KubernetesComponent): number {
  return (JSON.parse(readFileSync(join(machineDir(name), `${kind}.json`), 'utf8')) as { pid: number }).pid;
}

function rssMiB(pid: number): number {
  const kib = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'))?.[1];
  return Math.round(Number(kib) / 1024);
}

async function healthyWithin<K extends keyof MachineComponents>(component: MachineComponent<K>, timeoutMs: number): Promise<ComponentHealth> {
  const deadline = Date.now() + timeoutMs;
  let health = await component.health();
  while (!health.healthy && Date.now() < deadline) {
    await sleep(200);
    health = await component.health();
  }
  assert.equal(health.healthy, true, `${component.kind} not healthy within ${String(timeoutMs)} ms: ${health.reason ?? ''}`);
  return health;
}

test('a machine runs kube-apiserver, kube-controller-manager and kube-scheduler on its own etcd member', async (t) => {
  const machine = await provider.create({ cluster: CLUSTER, name: 'm1', ordinal: 1 });
  const components = provider.components(CLUSTER, 'm1');
  const { 'kube-apiserver': apiserver, 'kube-controller-manager': controllerManager, 'kube-scheduler': scheduler } = components;
  assert.ok(apiserver && controllerManager && scheduler, 'the local provider has every Kubernetes component');
  await components.etcd.start({ memberName: 'm1', version: ETCD, initialCluster: `m1=${machine.peerURL}`, initialClusterState: 'new', clusterToken: CLUSTER, maxLearners: 1 });
  await healthyWithin(components.etcd, 30_000);
  assert.deepEqual(await apiserver.health(), { running: false, healthy: false, reason: 'its process is not running' });

  const launch = { version: KUBERNETES, endpoint: ENDPOINT };
  const started = Date.now();
  await apiserver.start(launch);
  await healthyWithin(apiserver, 120_000);
  const readyMs = Date.now() - started;
  t.diagnostic(`kube-apiserver ready (/readyz ok) ${String(readyMs)} ms after its start`);
  const others = Date.now();
  await controllerManager.start(launch);
  await scheduler.start(launch);
  await healthyWithin(controllerManager, 60_000);
  await healthyWithin(scheduler, 60_000);
  t.diagnostic(`kube-controller-manager and kube-scheduler healthy ${String(Date.now() - others)} ms after their start`);

  // A second start leaves each running: the same process.
  const pids = Object.fromEntries(KUBERNETES_COMPONENTS.map((kind) => [kind, recordedPid('m1', kind)])) as Record<KubernetesComponent, number>;
  await apiserver.start(launch);
  await scheduler.start(launch);
  assert.equal(recordedPid('m1', 'kube-apiserver'), pids['kube-apiserver']);
  assert.equal(recordedPid('m1', 'kube-scheduler'), pids['kube-scheduler']);
  t.diagnostic(`RSS: ${KUBERNETES_COMPONENTS.map((kind) => `${kind} ${String(rssMiB(pids[kind]))} MiB`).join(', ')}`);

  assert.equal(await apiserver.version(), KUBERNETES);
  assert.equal(await controllerManager.version(), KUBERNETES);
  assert.equal(await scheduler.version(), KUBERNETES);

  // The admin kubeconfig, pointed at this machine's apiserver.
  const kubeconfig = join(newDir(), 'admin.conf');
  writeFileSync(kubeconfig, await provider.kubeconfig(CLUSTER, machine.address), { mode: 0o600 });
  const kubectl = async (...args: string[]): Promise<string> => (await run(findKubernetesProgram('kubectl', KUBERNETES), ['--kubeconfig', kubeconfig, ...args], { timeout: 30_000 })).stdout;
  assert.equal(await kubectl('get', '--raw', '/readyz'), 'ok');
  assert.equal((JSON.parse(await kubectl('get', '--raw', '/version')) as { gitVersion: string }).gitVersion, `v${KUBERNETES}`);
  await kubectl('create', 'namespace', 'fastplane-test');
  await kubectl('create', 'configmap', 'greeting', '-n', 'fastplane-test', '--from-literal=hello=world');
  assert.equal(await kubectl('get', 'configmap', 'greeting', '-n', 'fastplane-test', '-o', 'jsonpath={.data.hello}'), 'world');
  assert.equal(await kubectl('get', 'namespace', 'fastplane-test', '-o', 'jsonpath={.status.phase}'), 'Active');

  // Leader election: each elects itself within its lease duration (15 s), writing its Lease.
  const deadline = Date.now() + 60_000;
  let holders = '';
  while (Date.now() < deadline) {
    holders = await kubectl('get', 'lease', '-n', 'kube-system', 'kube-controller-manager', 'kube-scheduler', '-o', 'jsonpath={.items[*].spec.holderIdentity}').catch(() => '');
    if (holders.split(' ').filter((h) => h !== '').length === 2) break;
    await sleep(1000);
  }
  assert.equal(holders.split(' ').filter((h) => h !== '').length, 2, `both leases held: "${holders}"`);
  t.diagnostic(`both leader Leases held ${String(Date.now() - others)} ms after the controller-manager's start`);

  // Stopped in reverse order: each process gone, each component not running.
  for (const kind of [...KUBERNETES_COMPONENTS].reverse()) {
    const component = components[kind];
    assert.ok(component);
    await component.stop();
    // Gone, or a zombie until this process (its parent) reaps it.
    assert.equal(isRunning(pids[kind]), false, `${kind} process gone`);
    assert.deepEqual(await component.health(), { running: false, healthy: false, reason: 'its process is not running' });
  }
  assert.equal(await apiserver.version(), undefined);
  assert.equal(await scheduler.version(), undefined);
  await components.etcd.stop();
});

test("each machine's apiserver certificate names its address, the endpoint's, 127.0.0.1, the service IP and the kubernetes names; the cluster's files come from the record store", async () => {
  const machine = await provider.create({ cluster: CLUSTER, name: 'm2', ordinal: 2 });
  const apiserver = provider.components(CLUSTER, 'm2')['kube-apiserver'];
  assert.ok(apiserver);
  // Its member is not started: the apiserver starts (its certificate issued) and waits for etcd, not ready.
  await apiserver.start({ version: KUBERNETES, endpoint: ENDPOINT });
  const pid = recordedPid('m2', 'kube-apiserver');
  assert.equal((await apiserver.health()).healthy, false);
  await apiserver.stop();
  assert.equal(isRunning(pid), false);

  const cert = join(stateDir, 'clusters', CLUSTER, 'machines', 'm2', 'kubernetes', 'apiserver.crt');
  const sans = await subjectAltNames(cert);
  assert.deepEqual(sans.addresses, ['10.96.0.1', '127.0.0.1', machine.address, ENDPOINT.split(':')[0]].sort());
  assert.deepEqual(sans.dnsNames, ['kubernetes', 'kubernetes.default', 'kubernetes.default.svc', 'kubernetes.default.svc.cluster.local']);
  assert.match((await describeCertificate(cert)).issuer, /CN=kubernetes$/);
  const pki = join(stateDir, 'clusters', CLUSTER, 'kubernetes', 'pki');
  // The apiserver's etcd client chains to the etcd CA, not the Kubernetes one.
  assert.match((await describeCertificate(join(pki, 'apiserver-etcd-client.crt'))).issuer, /CN=fastplane-etcd-ca$/);
  assert.match((await describeCertificate(join(pki, 'admin.crt'))).subject, /O=system:masters/);

  // Another process on another state dir, sharing the record store, builds the same cluster's kubeconfig from the same CA.
  const elsewhere = new LocalProcessProvider({ stateDir: newDir(), addressPrefix: PREFIX, store });
  type Kubeconfig = { clusters: { cluster: { 'certificate-authority-data': string; server: string } }[] };
  const clusterOf = async (from: LocalProcessProvider): Promise<Kubeconfig['clusters'][number]['cluster']> => {
    const [entry] = (parse(await from.kubeconfig(CLUSTER, ENDPOINT)) as Kubeconfig).clusters;
    assert.ok(entry, 'the kubeconfig names its cluster');
    return entry.cluster;
  };
  const ours = await clusterOf(provider);
  const theirs = await clusterOf(elsewhere);
  assert.equal(theirs['certificate-authority-data'], ours['certificate-authority-data']);
  assert.equal(ours.server, `https://${ENDPOINT}`);
  assert.equal(Buffer.from(ours['certificate-authority-data'], 'base64').toString(), readFileSync(join(pki, 'ca.crt'), 'utf8'));
});

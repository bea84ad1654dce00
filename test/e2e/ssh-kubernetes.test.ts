import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CliEnv, statusOf, type CliRun } from '../support/cli.ts';
import { EndpointWriter, kubectlFor, TEST_KUBERNETES, type Kubectl, type Named } from '../support/kubectl.ts';
import { NetLab, type LabInfo } from '../support/netlab.ts';
import { labProcesses, sshKubernetesProvider } from '../support/ssh-kubernetes.ts';

// A Kubernetes control plane on the ssh provider: etcd, kube-apiserver, controller-manager and
// scheduler on lab hosts over SSH (each host its own network namespace and sshd), HAProxy on a lab host
// of its own as the endpoint, driven with the built kubectl from fastplane's side of the bridge.

const LAB = 68;
const lab = new NetLab(LAB);
// The lab's addresses are not loopback; the prefix only keeps any local member of this env apart.
const env = new CliEnv('127.55');
let info: LabInfo;
let endpoint: Kubectl;

function expectOk(run: CliRun, what: string): void {
  assert.equal(run.code, 0, `${what} exited ${String(run.code)}:\n${run.stderr.slice(-3000)}`);
}

describe('a Kubernetes control plane on the ssh provider, on the network lab', { timeout: 900_000 }, () => {
  before(async () => {
    // Five machine hosts (scaled 3 -> 5 -> 3 with no surge host) and the endpoint host.
    info = lab.up(6);
    const manifest = env.writeManifest('sk', { replicas: 3, rollout: { maxSurge: 0 }, kubernetes: { version: TEST_KUBERNETES }, provider: sshKubernetesProvider(info) });
    expectOk(await env.run(['up', '-f', manifest, '--timeout', '400s', '-o', 'json']), 'up');
    endpoint = await kubectlFor(env, 'sk');
  });

  after(async () => {
    try {
      expectOk(await env.run(['down', 'sk']), 'down');
      assert.deepEqual(labProcesses(info), [], 'down leaves no process on any host');
    } finally {
      lab.down();
      env.cleanup();
    }
  });

  test('Kubernetes on ssh without an endpoint, or with a machine host as endpoint host, exits 2 and changes nothing', async () => {
    const provider = sshKubernetesProvider(info);
    const missing = env.writeManifest('bad', { replicas: 3, rollout: { maxSurge: 0 }, kubernetes: { version: TEST_KUBERNETES }, provider: { ...provider, endpoint: undefined } });
    const refused = await env.run(['up', '-f', missing]);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, /spec\.provider\.endpoint: is required for a Kubernetes control plane on provider ssh/);
    const machineHost = info.hosts[0]?.address ?? '';
    const shared = env.writeManifest('bad', { replicas: 3, rollout: { maxSurge: 0 }, kubernetes: { version: TEST_KUBERNETES }, provider: { ...provider, endpoint: { host: { address: machineHost } } } });
    const sharedRun = await env.run(['up', '-f', shared]);
    assert.equal(sharedRun.code, 2, sharedRun.stderr);
    assert.ok(sharedRun.stderr.includes(`spec.provider.endpoint.host.address: ${machineHost} is also one of spec.provider.hosts`), sharedRun.stderr);
    assert.equal((await env.run(['status', 'bad'])).code !== 0, true, 'no control plane bad was recorded');
  });

  test('the endpoint on its own host routes to all three; kubectl through it writes what each apiserver reads back', async () => {
    const doc = statusOf((await env.run(['status', 'sk', '-o', 'json'])).stdout);
    assert.equal(doc.status.phase, 'Ready');
    assert.equal(doc.status.readyReplicas, 3);
    assert.equal(doc.status.kubernetes?.endpoint, `${info.hosts.at(-1)?.address ?? ''}:6443`);
    await endpoint.run(['create', 'namespace', 'tour']);
    await endpoint.run(['create', 'configmap', 'via-endpoint', '-n', 'tour']);
    const labAddresses = new Set(info.hosts.map((h) => h.address));
    for (const machine of doc.status.machines) {
      assert.ok(labAddresses.has(new URL(machine.clientURL ?? '').hostname), `${machine.name} runs on a lab host`);
      const direct = await kubectlFor(env, 'sk', machine.name);
      assert.equal((await direct.run(['get', '--raw', '/readyz'])).trim(), 'ok', `${machine.name}'s apiserver is ready`);
      await direct.run(['create', 'configmap', `via-${machine.name}`, '-n', 'tour']);
      const names = (await direct.json<Named>(['get', 'configmaps', '-n', 'tour'])).items.map((item) => item.metadata.name);
      assert.ok(names.includes('via-endpoint'), `${machine.name} reads what was written through the endpoint`);
    }
    const all = (await endpoint.json<Named>(['get', 'configmaps', '-n', 'tour'])).items.map((item) => item.metadata.name);
    for (const machine of doc.status.machines) assert.ok(all.includes(`via-${machine.name}`), `the endpoint reads what ${machine.name}'s apiserver wrote`);
  });

  test('3 -> 5 -> 3 with a writer through the endpoint: no acknowledged object is lost', async (t) => {
    await endpoint.run(['create', 'namespace', 'writer']);
    const writer = new EndpointWriter(endpoint, 'writer');
    const writing = writer.run();
    try {
      for (const replicas of ['5', '3']) {
        const scaled = await env.run(['scale', 'sk', '--replicas', replicas, '--timeout', '400s', '-o', 'json']);
        expectOk(scaled, `scale ${replicas}`);
        const doc = statusOf(scaled.stdout);
        assert.equal(doc.status.voters, Number(replicas));
        assert.equal(doc.status.conditions.find((c) => c.type === 'ControlPlaneComponentsHealthy')?.status, 'True');
      }
    } finally {
      writer.stop();
      await writing;
    }
    const stored = new Set((await endpoint.json<Named>(['get', 'configmaps', '-n', 'writer'])).items.map((item) => item.metadata.name));
    const lost = writer.acked.filter((name) => !stored.has(name));
    t.diagnostic(`writes acknowledged ${String(writer.acked.length)}, failed ${String(writer.failures)}, longest failed-write window ${String(writer.longestOutageMs)} ms${writer.lastError === undefined ? '' : ` (last failure: ${writer.lastError})`}`);
    assert.ok(writer.acked.length >= 10, `the writer kept writing (${String(writer.acked.length)} acknowledged)`);
    assert.deepEqual(lost, [], 'every acknowledged object is stored');
    const events = env.events('sk');
    for (const removal of events.filter((e) => e.action === 'RemoveMember' && e.outcome === 'Succeeded')) {
      const stop = events.find((e) => e.action === 'StopComponents' && e.machine === removal.machine && e.outcome === 'Succeeded');
      assert.ok(stop !== undefined && stop.at < removal.at, `${removal.machine ?? ''}: components stopped before its member was removed`);
    }
  });
});

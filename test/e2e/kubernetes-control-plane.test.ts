import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { cliEnvFactory, statusOf, type CliEnv } from '../support/cli.ts';
import { EndpointReader, EndpointWriter } from '../support/endpoint-traffic.ts';
import { kubectlFor, recordedPid, TEST_KUBERNETES, type Kubectl, type Named } from '../support/kubectl.ts';

// A Kubernetes control plane brought up by fastplane: real etcd, kube-apiserver, controller-manager,
// scheduler and HAProxy, driven with the built kubectl.

const newEnv = cliEnvFactory();

describe('a Kubernetes control plane on the local provider', { timeout: 600_000 }, () => {
  let env: CliEnv;
  let endpoint: Kubectl;

  before(async () => {
    env = newEnv('127.33');
    const up = await env.run(['up', '--name', 'k', '--replicas', '3', '--kubernetes', TEST_KUBERNETES, '--provisioning-delay', '2s', '--timeout', '240s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    endpoint = await kubectlFor(env, 'k');
  });

  test('0 -> 3: every machine runs each component, healthy, and the endpoint routes to all three', async () => {
    const status = await env.run(['status', 'k', '-o', 'json']);
    const doc = statusOf(status.stdout);
    assert.equal(doc.status.phase, 'Ready');
    assert.equal(doc.status.voters, 3);
    assert.equal(doc.status.readyReplicas, 3, 'a machine counts as ready with every component healthy');
    assert.match(doc.status.kubernetes?.endpoint ?? '', /^127\.33\.\d+\.0:6443$/);
    for (const machine of doc.status.machines) {
      assert.equal(machine.kubernetesVersion, TEST_KUBERNETES);
      assert.deepEqual(
        machine.conditions?.map((c) => [c.type, c.status]),
        ['EtcdPodHealthy', 'EtcdMemberHealthy', 'APIServerPodHealthy', 'ControllerManagerPodHealthy', 'SchedulerPodHealthy'].map((type) => [type, 'True']),
        `${machine.name}: ${JSON.stringify(machine.conditions)}`,
      );
    }
    assert.equal(doc.status.conditions.find((c) => c.type === 'ControlPlaneComponentsHealthy')?.status, 'True');
    const table = (await env.run(['status', 'k'])).stdout;
    assert.match(table, /kubernetes 1\.36\.3 {2}endpoint https:\/\/127\.33\.\d+\.0:6443/);
    assert.equal(table.split('\n').filter((line) => /^k-\d+ .* ready$/.test(line)).length, 3, table);
  });

  test('kubectl through the endpoint writes objects every apiserver reads back, and each answers /readyz and /version', async () => {
    await endpoint.run(['create', 'namespace', 'tour']);
    for (let i = 0; i < 3; i++) await endpoint.run(['create', 'configmap', `via-endpoint-${String(i)}`, '-n', 'tour', `--from-literal=i=${String(i)}`]);
    const machines = statusOf((await env.run(['status', 'k', '-o', 'json'])).stdout).status.machines.map((m) => m.name);
    for (const machine of machines) {
      const direct = await kubectlFor(env, 'k', machine);
      assert.equal((await direct.run(['get', '--raw', '/readyz'])).trim(), 'ok');
      const version = JSON.parse(await direct.run(['get', '--raw', '/version'])) as { gitVersion: string };
      assert.equal(version.gitVersion, `v${TEST_KUBERNETES}`);
      // Written through one apiserver, read through another: all share the etcd cluster.
      await direct.run(['create', 'configmap', `via-${machine}`, '-n', 'tour']);
      const names = (await direct.json<Named>(['get', 'configmaps', '-n', 'tour'])).items.map((item) => item.metadata.name);
      for (let i = 0; i < 3; i++) assert.ok(names.includes(`via-endpoint-${String(i)}`), `${machine} reads via-endpoint-${String(i)}`);
    }
    const all = (await endpoint.json<Named>(['get', 'configmaps', '-n', 'tour'])).items.map((item) => item.metadata.name);
    for (const machine of machines) assert.ok(all.includes(`via-${machine}`), `the endpoint reads what ${machine}'s apiserver wrote`);
  });

  test("the controller-manager's and the scheduler's leader Leases are held by one of the machines", async () => {
    const leases = await endpoint.json<{ items: { metadata: { name: string }; spec: { holderIdentity?: string } }[] }>(['get', 'leases', '-n', 'kube-system']);
    for (const name of ['kube-controller-manager', 'kube-scheduler']) {
      const lease = leases.items.find((item) => item.metadata.name === name);
      assert.ok(lease, `lease ${name} exists`);
      assert.ok((lease.spec.holderIdentity ?? '') !== '', `lease ${name} has a holder`);
    }
  });

  test('3 -> 5 -> 3 with a writer through the endpoint: no acknowledged object is lost', async (t) => {
    await endpoint.run(['create', 'namespace', 'writer']);
    const writer = new EndpointWriter(endpoint, 'writer');
    const writing = writer.run();
    try {
      for (const replicas of ['5', '3']) {
        const scaled = await env.run(['scale', 'k', '--replicas', replicas, '--timeout', '300s', '-o', 'json']);
        assert.equal(scaled.code, 0, scaled.stderr);
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
    assert.ok(writer.acked.length >= 20, `the writer kept writing (${String(writer.acked.length)} acknowledged)`);
    assert.deepEqual(lost, [], 'every acknowledged object is stored');
    // The machines that left were drained first: every departure left the endpoint before its member went.
    const events = env.events('k');
    for (const removal of events.filter((e) => e.action === 'RemoveMember' && e.outcome === 'Succeeded')) {
      const stop = events.find((e) => e.action === 'StopComponents' && e.machine === removal.machine && e.outcome === 'Succeeded');
      assert.ok(stop !== undefined && stop.at < removal.at, `${removal.machine ?? ''}: components stopped before its member was removed`);
    }
  });

  test('a hung apiserver: the endpoint stops routing to it within seconds, and its machine is replaced', async (t) => {
    const before = statusOf((await env.run(['status', 'k', '-o', 'json'])).stdout).status.machines.map((m) => m.name);
    const hung = before[1] ?? '';
    process.kill(recordedPid(env, 'k', hung, 'kube-apiserver'), 'SIGSTOP');
    const frozenAt = Date.now();
    const reader = new EndpointReader(endpoint);
    const reading = reader.run();
    try {
      const repaired = await env.run(['up', '--name', 'k', '--timeout', '300s', '-o', 'json']);
      assert.equal(repaired.code, 0, repaired.stderr);
      const after = statusOf(repaired.stdout).status.machines.map((m) => m.name);
      assert.ok(!after.includes(hung), `${hung} was replaced: ${after.join(', ')}`);
      assert.equal(after.length, 3);
    } finally {
      reader.stop();
      await reading;
    }
    const failed = env.events('k').find((e) => e.action === 'MarkMachineFailed' && e.machine === hung);
    assert.equal(failed?.reason, 'APIServerUnhealthy');
    // HAProxy marks it down after two failed checks a second apart (each waits its check timeout); a read
    // sent to it before then hangs until the reader's timeout. None sent after that fails.
    const late = reader.failures.filter((sentAt) => sentAt - frozenAt > 10_000);
    t.diagnostic(`reads ${String(reader.ok)} ok, ${String(reader.failures.length)} failed, the last failed one sent ${reader.failures.length === 0 ? 'never' : `${String(Math.max(...reader.failures) - frozenAt)} ms after the freeze`}`);
    assert.deepEqual(late, [], 'no read sent through the endpoint 10 s after the apiserver hung failed');
    assert.ok(reader.ok >= 10, 'the reader kept reading');
  });

  test('the etcd leader killed: every apiserver serves again once its member is back', async (t) => {
    const doc = statusOf((await env.run(['status', 'k', '-o', 'json'])).stdout);
    const leader = doc.status.leader ?? '';
    process.kill(recordedPid(env, 'k', leader, 'machine'), 'SIGKILL');
    const killedAt = Date.now();
    const repaired = await env.run(['up', '--name', 'k', '--timeout', '300s', '-o', 'json']);
    assert.equal(repaired.code, 0, repaired.stderr);
    const machines = statusOf(repaired.stdout).status.machines.map((m) => m.name);
    for (const machine of machines) {
      const direct = await kubectlFor(env, 'k', machine);
      assert.equal((await direct.run(['get', '--raw', '/readyz'])).trim(), 'ok', `${machine}'s apiserver is ready`);
      const names = (await direct.json<Named>(['get', 'configmaps', '-n', 'tour'])).items.map((item) => item.metadata.name);
      assert.ok(names.includes('via-endpoint-0'), `${machine} reads what was written before`);
    }
    t.diagnostic(`every apiserver ready ${String(Date.now() - killedAt)} ms after the leader's etcd was killed`);
  });

  test('a minor skip or a downgrade of Kubernetes exits 2 and changes nothing', async () => {
    const generation = statusOf((await env.run(['status', 'k', '-o', 'json'])).stdout).metadata.generation;
    const skip = await env.run(['up', '--name', 'k', '--kubernetes', '1.38.0']);
    assert.equal(skip.code, 2, skip.stderr);
    assert.match(skip.stderr, /spec\.kubernetes\.version: cannot skip a minor version \(1\.36\.3 -> 1\.38\.0\).*upgrade to 1\.37 first/);
    const down = await env.run(['up', '--name', 'k', '--kubernetes', '1.35.0']);
    assert.equal(down.code, 2, down.stderr);
    assert.match(down.stderr, /spec\.kubernetes\.version: cannot go down a minor version \(1\.36\.3 -> 1\.35\.0\)/);
    const after = statusOf((await env.run(['status', 'k', '-o', 'json'])).stdout);
    assert.equal(after.metadata.generation, generation);
    assert.equal(after.spec.kubernetes?.version, TEST_KUBERNETES);
  });

  after(async () => {
    const down = await env.run(['down', 'k']);
    assert.equal(down.code, 0, down.stderr);
  });
});

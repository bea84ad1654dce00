import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { cliEnvFactory, statusOf, type CliEnv } from '../support/cli.ts';
import { clientCertificateOf, localMachineAddresses, sampleVersions, skewBreaches, type VersionSample } from '../support/component-versions.ts';
import { EndpointWriter } from '../support/endpoint-traffic.ts';
import { kubectlFor, TEST_KUBERNETES, TEST_KUBERNETES_NEXT, type Kubectl, type Named } from '../support/kubectl.ts';

// A Kubernetes version rollout, one minor up, on real components: 3 machines at 1.36 rolled to 1.37
// (surge machine first, old ones leave one at a time) with a writer through the endpoint, every
// component's reported version sampled all along and held to the version skew policy.

const newEnv = cliEnvFactory();

describe('rollout --kubernetes-version, one minor up', { timeout: 900_000 }, () => {
  let env: CliEnv;
  let endpoint: Kubectl;

  before(async () => {
    env = newEnv('127.39');
    const up = await env.run(['up', '--name', 'kr', '--replicas', '3', '--kubernetes', TEST_KUBERNETES, '--timeout', '300s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    endpoint = await kubectlFor(env, 'kr');
  });

  after(async () => {
    await env.run(['down', 'kr']);
  });

  test(`${TEST_KUBERNETES} -> ${TEST_KUBERNETES_NEXT} with a writer: objects kept, the skew policy held at every sample`, async (t) => {
    await endpoint.run(['create', 'namespace', 'kept']);
    for (let i = 0; i < 5; i++) await endpoint.run(['create', 'configmap', `before-${String(i)}`, '-n', 'kept']);
    const client = clientCertificateOf((await env.run(['kubeconfig', 'kr'])).stdout);
    const writer = new EndpointWriter(endpoint, 'kept');
    const writing = writer.run();
    const samples: VersionSample[] = [];
    const sampling = { on: true };
    const sampler = (async () => {
      while (sampling.on) {
        samples.push(await sampleVersions(localMachineAddresses(env, 'kr'), client));
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    })();
    let rolled;
    try {
      rolled = await env.run(['rollout', 'kr', '--kubernetes-version', TEST_KUBERNETES_NEXT, '--timeout', '600s', '-o', 'json']);
    } finally {
      writer.stop();
      sampling.on = false;
      await Promise.all([writing, sampler]);
    }
    assert.equal(rolled.code, 0, rolled.stderr);
    const doc = statusOf(rolled.stdout);
    assert.equal(doc.status.machines.length, 3);
    for (const machine of doc.status.machines) assert.equal(machine.kubernetesVersion, TEST_KUBERNETES_NEXT, machine.name);
    assert.equal(doc.status.conditions.find((c) => c.type === 'ControlPlaneComponentsHealthy')?.status, 'True');

    const breaches = samples.flatMap((sample) => skewBreaches(sample).map((breach) => `${new Date(sample.at).toISOString()}: ${breach}`));
    const mixed = samples.filter((s) => new Set([...s.apiservers.values()]).size > 1).length;
    const last = samples.at(-1);
    t.diagnostic(`${String(samples.length)} version samples, ${String(mixed)} with apiservers at two versions; writes acknowledged ${String(writer.acked.length)}, failed ${String(writer.failures)}, longest failed-write window ${String(writer.longestOutageMs)} ms`);
    assert.ok(mixed > 0, 'the samples saw apiservers of both versions at once (the skew check had something to judge)');
    const most = Math.max(...samples.map((s) => s.apiservers.size));
    assert.ok(most <= 4, `never more apiservers than replicas + maxSurge (1): at most ${String(most)}`);
    assert.deepEqual(breaches, [], 'no sample breaks the version skew policy');
    assert.deepEqual(new Set(last?.apiservers.values()), new Set([TEST_KUBERNETES_NEXT]), 'every apiserver reports the new version at the end');
    assert.deepEqual(new Set([...(last?.controllerManagers.values() ?? []), ...(last?.schedulers.values() ?? [])]), new Set([TEST_KUBERNETES_NEXT]));

    const stored = new Set((await endpoint.json<Named>(['get', 'configmaps', '-n', 'kept'])).items.map((item) => item.metadata.name));
    const lost = [...writer.acked, ...[0, 1, 2, 3, 4].map((i) => `before-${String(i)}`)].filter((name) => !stored.has(name));
    assert.ok(writer.acked.length >= 20, `the writer kept writing (${String(writer.acked.length)} acknowledged)`);
    assert.deepEqual(lost, [], 'every object written before and during the rollout is stored');
  });
});

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { cliEnvFactory, statusOf, type CliEnv } from '../support/cli.ts';
import { assertRolloutWithinSkew, clientCertificateOf, localMachineAddresses, sampleVersionsUntilStopped, type VersionSample } from '../support/component-versions.ts';
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
    const sampler = sampleVersionsUntilStopped(() => localMachineAddresses(env, 'kr'), client, 250);
    let rolled;
    let samples: VersionSample[];
    try {
      rolled = await env.run(['rollout', 'kr', '--kubernetes-version', TEST_KUBERNETES_NEXT, '--timeout', '600s', '-o', 'json']);
    } finally {
      writer.stop();
      [samples] = await Promise.all([sampler.stop(), writing]);
    }
    assert.equal(rolled.code, 0, rolled.stderr);
    const doc = statusOf(rolled.stdout);
    assert.equal(doc.status.machines.length, 3);
    for (const machine of doc.status.machines) assert.equal(machine.kubernetesVersion, TEST_KUBERNETES_NEXT, machine.name);
    assert.equal(doc.status.conditions.find((c) => c.type === 'ControlPlaneComponentsHealthy')?.status, 'True');

    const judged = assertRolloutWithinSkew(samples, TEST_KUBERNETES_NEXT);
    t.diagnostic(`${judged}; writes acknowledged ${String(writer.acked.length)}, failed ${String(writer.failures)}, longest failed-write window ${String(writer.longestOutageMs)} ms`);
    const most = Math.max(...samples.map((s) => s.apiservers.size));
    assert.ok(most <= 4, `never more apiservers than replicas + maxSurge (1): at most ${String(most)}`);

    const stored = new Set((await endpoint.json<Named>(['get', 'configmaps', '-n', 'kept'])).items.map((item) => item.metadata.name));
    const lost = [...writer.acked, ...[0, 1, 2, 3, 4].map((i) => `before-${String(i)}`)].filter((name) => !stored.has(name));
    assert.ok(writer.acked.length >= 20, `the writer kept writing (${String(writer.acked.length)} acknowledged)`);
    assert.deepEqual(lost, [], 'every object written before and during the rollout is stored');
  });
});

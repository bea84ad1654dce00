import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { describeIssues, ControlPlaneSchema, RULE_MESSAGES } from '../../src/api/control-plane.ts';
import { cliEnvFactory, type CliEnv } from '../support/cli.ts';
import { kubectlFor, TEST_KUBERNETES, type Kubectl } from '../support/kubectl.ts';

// The ControlPlane CRD on a real API server: a one-machine Kubernetes control plane brought up by
// fastplane, `fastplane install`, then kubectl as a Cluster API user would run it.

const newEnv = cliEnvFactory();

/** What the CLI prints for a spec (`error: ` aside): describeIssues, as every command says it. */
function cliSays(spec: Record<string, unknown>): string[] {
  const result = ControlPlaneSchema.safeParse({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name: 'bad' }, spec });
  assert.ok(!result.success, `the CLI refuses ${JSON.stringify(spec)}`);
  return describeIssues(result.error);
}

describe('the ControlPlane CRD on a Kubernetes control plane brought up by fastplane', { timeout: 240_000 }, () => {
  let env: CliEnv;
  let kubectl: Kubectl;
  let manifests = 0;

  /** kubectl apply of a ControlPlane: its stdout, or the error it failed with (kubectl's stderr). */
  async function apply(name: string, spec: Record<string, unknown>): Promise<{ ok: boolean; said: string }> {
    const file = join(env.stateDir, `manifest-${String(manifests++)}.yaml`);
    writeFileSync(file, stringify({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name }, spec }));
    try {
      return { ok: true, said: await kubectl.run(['apply', '-f', file]) };
    } catch (error) {
      return { ok: false, said: (error as Error).message };
    }
  }

  before(async () => {
    env = newEnv('127.35');
    const up = await env.run(['up', '--name', 'mgmt', '--replicas', '1', '--kubernetes', TEST_KUBERNETES, '--timeout', '150s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    kubectl = await kubectlFor(env, 'mgmt');
  });

  test('fastplane install applies the CRD and waits until it is served; again, it changes nothing', async () => {
    const first = await env.run(['install', '--kubeconfig', kubectl.kubeconfig]);
    assert.equal(first.code, 0, first.stderr);
    assert.match(first.stdout, /customresourcedefinition\.apiextensions\.k8s\.io\/controlplanes\.fastplane\.dev created/);
    assert.match(first.stdout, /condition met/);
    const again = await env.run(['install', '--kubeconfig', kubectl.kubeconfig]);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /controlplanes\.fastplane\.dev unchanged/);
  });

  test('a good ControlPlane is accepted and defaulted as the CLI defaults it', async () => {
    const applied = await apply('web', { replicas: 3 });
    assert.ok(applied.ok, applied.said);
    const object = await kubectl.json<{ spec: { replicas: number; provider: { name: string }; rollout: { maxSurge: number }; remediation: { unhealthyAfter: string } } }>(['get', 'controlplane', 'web']);
    const cli = ControlPlaneSchema.parse({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name: 'web' }, spec: { replicas: 3 } }).spec;
    assert.deepEqual(
      [object.spec.replicas, object.spec.provider.name, object.spec.rollout.maxSurge, object.spec.remediation.unhealthyAfter],
      [cli.replicas, cli.provider.name, cli.rollout.maxSurge, cli.remediation.unhealthyAfter],
    );
  });

  const refused: { what: string; spec: Record<string, unknown>; words: string }[] = [
    { what: 'even replicas', spec: { replicas: 4 }, words: 'spec.replicas: must be odd, got 4' },
    { what: 'maxSurge 0 with 1 replica', spec: { replicas: 1, rollout: { maxSurge: 0 } }, words: `spec.rollout.maxSurge: ${RULE_MESSAGES.surgeNeedsReplicas('1')}` },
    { what: 'an unknown provider (an enum)', spec: { provider: { name: 'cloud' } }, words: 'spec.provider.name: unknown provider; known: local-process, ssh' },
    { what: 'an unknown strategy (an enum)', spec: { scaleUp: { strategy: 'fast' } }, words: 'spec.scaleUp.strategy: must be parallel or serial' },
    { what: 'two learners on etcd 3.5', spec: { version: '3.5.24', etcd: { maxLearners: 2 } }, words: 'spec.etcd.maxLearners: above 1 needs etcd 3.6 or later (--max-learners), got version 3.5.24' },
    { what: 'two learners on the etcd Kubernetes 1.33 defaults to', spec: { kubernetes: { version: '1.33.1' }, etcd: { maxLearners: 2 } }, words: 'got version 3.5.' },
    { what: 'Kubernetes without certificates', spec: { kubernetes: { version: TEST_KUBERNETES }, provider: { insecure: true } }, words: `spec.kubernetes: ${RULE_MESSAGES.kubernetesInsecure()}` },
    { what: 'a reversed delay range', spec: { provider: { provisioningDelay: '8s-3s' } }, words: 'spec.provider.provisioningDelay: must be a duration (8s) or a range (3s-8s) with min <= max' },
  ];

  test('bad specs are refused by the API server with the words the CLI prints, after the same field path', async () => {
    for (const { what, spec, words } of refused) {
      const cli = cliSays(spec);
      assert.ok(cli.some((line) => line.includes(words)), `${what}: the CLI says ${words}: ${cli.join('; ')}`);
      const applied = await apply('bad', spec);
      assert.ok(!applied.ok, `${what}: accepted`);
      for (const line of cli) {
        const [path = '', ...rest] = line.split(': ');
        // The API server prints `PATH: Invalid value: VALUE: WORDS`.
        assert.match(applied.said, new RegExp(`${path.replace(/\./g, '\\.')}: Invalid value: .*${rest.join(': ').replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}`), `${what}: the API server says ${line}`);
      }
    }
    // The CLI keeps names to 40 characters (machine names derive from them); Kubernetes allows 253.
    const long = await apply('n'.repeat(41), { replicas: 3 });
    assert.ok(!long.ok && /metadata\.name: Invalid value: .*must be at most 40 characters/.test(long.said), long.said);
    // Unknown fields: the CLI's strict schema refuses them, and so does kubectl's strict field validation.
    const unknown = await apply('bad', { replica: 3 });
    assert.ok(!unknown.ok && /unknown field "spec\.replica"/.test(unknown.said), unknown.said);
    assert.ok(cliSays({ replica: 3 }).some((line) => line.includes('replica')));
    const objects = await kubectl.json<{ items: { metadata: { name: string } }[] }>(['get', 'fcp']);
    assert.deepEqual(objects.items.map((item) => item.metadata.name), ['web'], 'no bad object was stored');
  });

  test('kubectl explain prints the descriptions of the schema', async () => {
    const explained = await kubectl.run(['explain', 'controlplane.spec.replicas']);
    assert.match(explained, /FIELD: replicas <integer>/);
    assert.match(explained.replace(/\s+/g, ' '), /How many etcd members \(voters\) the control plane runs: odd, from 1 to 9\./);
    assert.match((await kubectl.run(['explain', 'fcp.spec.rollout.maxSurge'])).replace(/\s+/g, ' '), /0 removes a member before adding its replacement/);
  });

  test('kubectl get fcp shows the printer columns, filled from the status subresource', async () => {
    assert.match((await kubectl.run(['get', 'fcp'])).split('\n')[0] ?? '', /^NAME\s+REPLICAS\s+READY\s+VOTERS\s+LEARNERS\s+VERSION\s+AVAILABLE\s+AGE$/);
    const status = { replicas: 3, readyReplicas: 2, voters: 3, learners: 0, version: '3.6.17', conditions: [{ type: 'Available', status: 'True', reason: 'Available', lastTransitionTime: new Date().toISOString().replace(/\.\d+Z$/, 'Z') }] };
    await kubectl.run(['patch', 'fcp', 'web', '--subresource=status', '--type=merge', '-p', JSON.stringify({ status })]);
    const row = (await kubectl.run(['get', 'fcp', 'web', '--no-headers'])).trim().split(/\s+/);
    assert.deepEqual(row.slice(0, 7), ['web', '3', '2', '3', '0', '3.6.17', 'True']);
    // A status written through the main resource is ignored: only the subresource writes it.
    await kubectl.run(['patch', 'fcp', 'web', '--type=merge', '-p', JSON.stringify({ status: { voters: 9 } })]);
    assert.equal((await kubectl.json<{ status: { voters: number } }>(['get', 'fcp', 'web'])).status.voters, 3);
  });

  test('kubectl scale changes spec.replicas through the scale subresource, and refuses an even count in the CLI words', async () => {
    const scale = JSON.parse(await kubectl.run(['get', '--raw', '/apis/fastplane.dev/v1alpha1/namespaces/default/controlplanes/web/scale'])) as { spec: { replicas: number }; status: { replicas: number } };
    assert.deepEqual([scale.spec.replicas, scale.status.replicas], [3, 3]);
    await kubectl.run(['scale', 'fcp/web', '--replicas', '5']);
    assert.equal((await kubectl.json<{ spec: { replicas: number } }>(['get', 'fcp', 'web'])).spec.replicas, 5);
    await assert.rejects(kubectl.run(['scale', 'fcp/web', '--replicas', '4']), /spec\.replicas: Invalid value: 4: must be odd, got 4/);
    assert.equal((await kubectl.json<{ spec: { replicas: number } }>(['get', 'fcp', 'web'])).spec.replicas, 5);
  });

  after(async () => {
    const down = await env.run(['down', 'mgmt']);
    assert.equal(down.code, 0, down.stderr);
  });
});

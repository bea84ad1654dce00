import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { cliEnvFactory, isRunning, pidsUnder, type CliEnv, type CliRun } from '../support/cli.ts';
import type { Kubectl } from '../support/kubectl.ts';
import { controllerEvents, eventually as waitFor, managementCluster, type ManagementCluster, type ObjectJson } from '../support/management-cluster.ts';
import type { TcpProxy } from '../support/tcp-proxy.ts';

// fastplane's controller on a management cluster that fastplane itself brought up: the README's
// commands (up, install, controller, kubectl apply, kubectl wait), then what a Cluster API user does
// with kubectl, the controller running with the ServiceAccount `fastplane install` creates.

const newEnv = cliEnvFactory();
const ROOT = join(import.meta.dirname, '..', '..');
const EXAMPLE = join(ROOT, 'examples/kubernetes/controlplane.yaml');

describe('fastplane controller --kubeconfig on a management cluster brought up by fastplane', { timeout: 300_000 }, () => {
  let env: CliEnv;
  let admin: Kubectl;
  let proxy: TcpProxy;
  let controller: { child: ChildProcess; done: Promise<CliRun> };
  let mgmt: ManagementCluster;
  let output = (): string => '';

  const object = (name: string): Promise<ObjectJson> => admin.json<ObjectJson>(['get', 'fcp', name]);
  const events = (name: string) => controllerEvents(admin, name);

  /** Converged at `replicas`: the status says so for the object's current generation. */
  function convergedAt(replicas: number): () => Promise<ObjectJson | undefined> {
    return async () => {
      const got = await object('web');
      const s = got.status;
      return s?.observedGeneration === got.metadata.generation && s.replicas === replicas && s.readyReplicas === replicas && env.machines('web').length === replicas ? got : undefined;
    };
  }

  before(async () => {
    env = newEnv('127.46');
    mgmt = await managementCluster(env);
    ({ admin, proxy } = mgmt);
    assert.match(mgmt.install.stdout, /serviceaccount\/fastplane-controller created/);
    assert.match(mgmt.install.stdout, /clusterrole\.rbac\.authorization\.k8s\.io\/fastplane-controller created/);
    const kubeconfig = await mgmt.accountKubeconfig('fastplane-controller', 'fastplane-system', 'controller.kubeconfig');
    controller = env.start(['controller', '--kubeconfig', kubeconfig, '--metrics-address', '127.46.0.1:0', '--id', 'mgmt-controller', '--relist-every', '20s']);
    let stdout = '';
    controller.child.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
    output = () => stdout;
  });

  test('kubectl apply of the example, then kubectl wait --for=condition=Available: finalizer, status and Events', async () => {
    await admin.run(['apply', '-f', EXAMPLE]);
    await admin.run(['wait', '--for=condition=Available', 'controlplane/web', '--timeout=120s'], 130_000);
    const got = await waitFor('the status of 3 ready replicas', convergedAt(3));
    assert.deepEqual(got.metadata.finalizers, ['fastplane.dev/teardown']);
    const available = got.status?.conditions?.find((c) => c.type === 'Available');
    assert.ok(available);
    assert.equal(available.reason, 'QuorumHealthy', 'the reason fastplane status gives');
    assert.equal(available.observedGeneration, got.metadata.generation);
    const reasons = (await events('web')).map((e) => e.reason);
    assert.ok(reasons.includes('InitCluster') && reasons.includes('PromoteLearner'), `Events: ${reasons.join(', ')}`);
  });

  test('kubectl scale 3 -> 5 -> 3 converges, the new machines created in parallel', async () => {
    const before = new Set(env.machines('web').map((m) => m.name));
    await admin.run(['scale', 'fcp/web', '--replicas', '5']);
    await waitFor('5 ready replicas', convergedAt(5));
    const created = env.events('web').filter((e) => e.action === 'CreateMachine' && e.outcome === 'Succeeded' && e.machine !== undefined && !before.has(e.machine));
    assert.equal(created.length, 2, JSON.stringify(created));
    assert.ok(Math.max(...created.map((e) => e.at)) <= Math.min(...created.map((e) => e.endedAt ?? e.at)), `both machines were being created at once: ${JSON.stringify(created)}`);
    await admin.run(['scale', 'fcp/web', '--replicas', '3']);
    await waitFor('3 ready replicas', convergedAt(3));
  });

  test('its watch cut mid-reconcile, the controller lists again and converges with no action twice', async () => {
    await admin.run(['scale', 'fcp/web', '--replicas', '5']);
    await waitFor('a machine being added', () => (env.machines('web').length > 3 ? true : undefined));
    assert.ok(proxy.cut() > 0, 'the controller had connections open');
    await waitFor('the controller saying it listed again', () => (/the watch of .* ended: .*; listing again/.test(output()) ? true : undefined), 30_000);
    // A change made while the watch was down, and one made after: both are seen.
    await admin.run(['scale', 'fcp/web', '--replicas', '3']);
    await waitFor('3 ready replicas', convergedAt(3));
    proxy.cut();
    await admin.run(['scale', 'fcp/web', '--replicas', '5']);
    await waitFor('5 ready replicas', convergedAt(5));
    // Each recorded action is one Event, however often the objects were listed again; and each
    // generation of the object was stored once (a re-list stores nothing new).
    const notes = (await events('web')).map((e) => `${e.reason}: ${e.note}`);
    const actions = env.events('web').filter((e) => e.action !== undefined && e.outcome === 'Succeeded').map((e) => `${e.action ?? ''}: ${e.message}`);
    for (const action of new Set(actions)) assert.equal(notes.filter((n) => n === action).length, actions.filter((a) => a === action).length, `Events of ${action}`);
    assert.equal(env.controlPlaneRecords().find((cp) => cp.name === 'web')?.generation, (await object('web')).metadata.generation);
  });

  test('a spec the CRD accepts but the CLI refuses becomes Available False, reason InvalidSpec, in the CLI words', async () => {
    const file = env.writeManifest('odd', { replicas: 1, version: '3.9.1' });
    await admin.run(['apply', '-f', file]);
    const condition = await waitFor('the InvalidSpec condition', async () => {
      const c = (await object('odd')).status?.conditions?.find((x) => x.type === 'Available');
      return c?.reason === 'InvalidSpec' ? c : undefined;
    });
    assert.equal(condition.status, 'False');
    assert.match(condition.message ?? '', /etcd 3\.9\.1 is not installed/);
    assert.ok(!env.controlPlanes().includes('odd'), 'nothing stored for it');
    assert.ok(isRunning(controller.child.pid), 'no crash');
    await admin.run(['delete', 'fcp', 'odd', '--timeout=60s'], 70_000);
  });

  test('kubectl apply of a version change rolls out: every machine replaced at the new version', async () => {
    await admin.run(['scale', 'fcp/web', '--replicas', '3']);
    await waitFor('3 ready replicas', convergedAt(3));
    // By member ID: a machine name can be given again once its machine is gone.
    const before = new Set(env.machines('web').map((m) => m.memberId));
    await admin.run(['patch', 'fcp/web', '--type', 'merge', '-p', JSON.stringify({ spec: { version: '3.7.4' } })]);
    let seen = '';
    await waitFor('3 ready replicas at 3.7.4', async () => {
      const got = await convergedAt(3)();
      seen = JSON.stringify({ before: [...before], machines: env.machines('web').map((m) => [m.name, m.phase, m.version, m.memberId]), status: (await object('web')).status?.conditions?.map((c) => [c.type, c.status, c.reason, c.message]) });
      return got !== undefined && env.machines('web').every((m) => m.version === '3.7.4' && !before.has(m.memberId)) ? got : undefined;
    }, 150_000).catch((error: unknown) => {
      throw new Error(`${String(error)}; last seen: ${seen}`);
    });
    const reasons = (await events('web')).map((e) => e.reason);
    assert.ok(reasons.includes('CreateMachine') && reasons.includes('RemoveMember'), `Events of the rollout: ${reasons.join(', ')}`);
  });

  test('kubectl delete tears the machines down, and the object goes only after', async () => {
    const members = pidsUnder(join(env.stateDir, 'clusters', 'web'));
    assert.ok(members.length > 0);
    await admin.run(['delete', 'fcp', 'web', '--timeout=120s'], 130_000);
    assert.deepEqual(members.filter(isRunning), [], 'no etcd process of web left once the object is gone');
    assert.ok(!env.controlPlanes().includes('web'));
    assert.ok(env.controlPlanes().includes('mgmt'), 'the management cluster itself untouched');
  });

  test('a role without patch on controlplanes/status: the controller says which permission is missing and exits 1', async () => {
    const role = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'fastplane-limited' }, rules: [{ apiGroups: ['fastplane.dev'], resources: ['controlplanes'], verbs: ['list', 'watch', 'patch'] }, { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create'] }] };
    const file = join(env.stateDir, 'limited.yaml');
    writeFileSync(file, stringify(role));
    await admin.run(['apply', '-f', file]);
    await admin.run(['create', 'serviceaccount', 'limited', '-n', 'fastplane-system']);
    await admin.run(['create', 'clusterrolebinding', 'fastplane-limited', '--clusterrole', 'fastplane-limited', '--serviceaccount', 'fastplane-system:limited']);
    const kubeconfig = await mgmt.accountKubeconfig('limited', 'fastplane-system', 'limited.kubeconfig');
    const run = await env.run(['controller', '--kubeconfig', kubeconfig, '--metrics-address', '127.46.0.1:0', '--id', 'limited']);
    assert.equal(run.code, 1, run.stderr);
    assert.match(run.stderr, /^error: forbidden: the controller may not patch controlplanes\/status \(fastplane\.dev\) on https:\/\/\S+; fastplane install --kubeconfig FILE grants these/m);
    assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
  });

  after(async () => {
    if (controller.child.exitCode === null) {
      controller.child.kill('SIGTERM');
      const stopped = await controller.done;
      assert.equal(stopped.code, 0, stopped.stderr);
    }
    await proxy.close();
    const down = await env.run(['down', 'mgmt']);
    assert.equal(down.code, 0, down.stderr);
  });
});

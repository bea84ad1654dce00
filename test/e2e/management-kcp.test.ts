import assert from 'node:assert/strict';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { stringify } from 'yaml';
import { CONTROL_PLANE_PERMISSIONS, controllerRules } from '../../src/api/rbac.ts';
import { cliEnvFactory, isRunning, pidsUnder, type CliEnv, type CliRun } from '../support/cli.ts';
import type { Kubectl } from '../support/kubectl.ts';
import { controllerEvents, eventually, managementCluster, type ManagementCluster } from '../support/management-cluster.ts';

// Cluster API's own KubeadmControlPlane objects on a management cluster fastplane brought up: the
// CRD from Cluster API's Go module, the controller with the ServiceAccount's token and
// --kubeadm-control-planes, then what a Cluster API user does with kubectl. The objects' Kubernetes
// minor (1.34) has no build here, so their machines run etcd only, and quickly.

const newEnv = cliEnvFactory();
const ROOT = join(import.meta.dirname, '..', '..');
const KCP_CRD = 'kubeadmcontrolplanes.controlplane.cluster.x-k8s.io';

interface KcpJson {
  metadata: { generation: number; finalizers?: string[] };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    readyReplicas?: number;
    availableReplicas?: number;
    upToDateReplicas?: number;
    initialization?: { controlPlaneInitialized?: boolean };
    deprecated?: { v1beta1?: { updatedReplicas?: number; readyReplicas?: number } };
    conditions?: { type: string; status: string; reason: string; message?: string; observedGeneration?: number }[];
  };
}

/** A KubeadmControlPlane v1beta2 as Cluster API users write it, etcd 3.6 (parallel learners) by its image tag. */
function kcp(name: string, replicas: number, annotated: boolean): string {
  return stringify({
    apiVersion: 'controlplane.cluster.x-k8s.io/v1beta2',
    kind: 'KubeadmControlPlane',
    metadata: { name, namespace: 'default', ...(annotated ? { annotations: { 'fastplane.dev/manage': 'true' } } : {}) },
    spec: {
      replicas,
      version: 'v1.34.1',
      machineTemplate: { spec: { infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachineTemplate', name } } },
      kubeadmConfigSpec: { clusterConfiguration: { etcd: { local: { imageTag: '3.6.17-0' } } } },
    },
  });
}

describe('fastplane controller --kubeadm-control-planes: Cluster API KubeadmControlPlanes on a management cluster', { timeout: 300_000 }, () => {
  let env: CliEnv;
  let mgmt: ManagementCluster;
  let admin: Kubectl;
  let controller: { child: ChildProcess; done: Promise<CliRun> };

  const object = (name: string): Promise<KcpJson> => admin.json<KcpJson>(['get', 'kcp', name]);
  const apply = async (name: string, replicas: number, annotated: boolean): Promise<void> => {
    const file = join(env.stateDir, `${name}.kcp.yaml`);
    writeFileSync(file, kcp(name, replicas, annotated));
    await admin.run(['apply', '-f', file]);
  };
  function convergedAt(replicas: number): () => Promise<KcpJson | undefined> {
    return async () => {
      const got = await object('web');
      const s = got.status;
      const ok = s?.observedGeneration === got.metadata.generation && s.replicas === replicas && s.readyReplicas === replicas && s.upToDateReplicas === replicas;
      return ok && env.machines('web').length === replicas ? got : undefined;
    };
  }

  before(async () => {
    env = newEnv('127.133');
    const crd = execFileSync('bash', [join(ROOT, 'scripts/install-cluster-api-crds.sh')], { encoding: 'utf8' }).trim();
    mgmt = await managementCluster(env, ['--kubeadm-control-plane-crd', crd]);
    admin = mgmt.admin;
    assert.match(mgmt.install.stdout, new RegExp(`customresourcedefinition\\.apiextensions\\.k8s\\.io/${KCP_CRD} serverside-applied`));
    const kubeconfig = await mgmt.accountKubeconfig('fastplane-controller', 'fastplane-system', 'controller.kubeconfig');
    controller = env.start(['controller', '--kubeconfig', kubeconfig, '--kubeadm-control-planes', '--metrics-address', '127.133.0.1:0', '--id', 'kcp-controller']);
  });

  test('the CRD from the module is served as v1beta2 only, without a conversion webhook', async () => {
    const crd = await admin.json<{ spec: { conversion?: { strategy: string }; versions: { name: string; served: boolean; storage: boolean }[] } }>(['get', 'crd', KCP_CRD]);
    assert.equal(crd.spec.conversion?.strategy, 'None');
    assert.deepEqual(crd.spec.versions.map((v) => [v.name, v.served, v.storage]), [['v1beta1', false, false], ['v1beta2', true, true]]);
    await assert.rejects(admin.run(['get', 'kubeadmcontrolplanes.v1beta1.controlplane.cluster.x-k8s.io']), /doesn't have a resource type/, 'v1beta1 is not served');
  });

  test('an annotated KCP of 3 replicas converges: finalizer, v1beta2 status and conditions, Events', async () => {
    // Unannotated, and made first: by the time web converges the controller has long seen it.
    await apply('other', 3, false);
    await apply('web', 3, true);
    await admin.run(['wait', '--for=condition=Available', 'kcp/web', '--timeout=120s'], 130_000);
    const got = await eventually('the status of 3 ready replicas', convergedAt(3));
    assert.deepEqual(got.metadata.finalizers, ['fastplane.dev/teardown']);
    const { status } = got;
    assert.ok(status);
    assert.equal(status.availableReplicas, 3);
    assert.equal(status.deprecated?.v1beta1?.updatedReplicas, 3);
    assert.equal(status.initialization?.controlPlaneInitialized, true);
    const condition = (type: string) => status.conditions?.find((c) => c.type === type);
    assert.equal(condition('Available')?.reason, 'QuorumHealthy');
    assert.equal(condition('Available')?.observedGeneration, got.metadata.generation);
    assert.equal(condition('MachinesUpToDate')?.status, 'True', "fastplane's UpToDate under KCP's name");
    assert.equal(condition('UpToDate'), undefined);
    const reasons = (await controllerEvents(admin, 'web')).map((e) => `${e.regarding.kind}/${e.reason}`);
    assert.ok(reasons.includes('KubeadmControlPlane/InitCluster') && reasons.includes('KubeadmControlPlane/PromoteLearner'), `Events: ${reasons.join(', ')}`);
  });

  test('kubectl scale kcp/web --replicas 5 converges, the new machines provisioned and caught up in parallel', async () => {
    const before = new Set(env.machines('web').map((m) => m.name));
    await admin.run(['scale', 'kcp/web', '--replicas', '5']);
    await eventually('5 ready replicas', convergedAt(5));
    const events = env.events('web');
    const created = events.filter((e) => e.action === 'CreateMachine' && e.outcome === 'Succeeded' && e.machine !== undefined && !before.has(e.machine));
    assert.equal(created.length, 2, JSON.stringify(created));
    assert.ok(Math.max(...created.map((e) => e.at)) <= Math.min(...created.map((e) => e.endedAt ?? e.at)), `both machines were being created at once: ${JSON.stringify(created)}`);
    // Both joined as learners before either was promoted: they caught up side by side.
    const added = events.filter((e) => e.action === 'AddLearner' && e.outcome === 'Succeeded' && e.machine !== undefined && !before.has(e.machine));
    const promoted = events.filter((e) => e.action === 'PromoteLearner' && e.outcome === 'Succeeded' && e.machine !== undefined && !before.has(e.machine));
    assert.equal(added.length, 2, JSON.stringify(added));
    assert.ok(Math.max(...added.map((e) => e.endedAt ?? e.at)) <= Math.min(...promoted.map((e) => e.at)), `both learners were added before the first promotion: ${JSON.stringify([...added, ...promoted])}`);
  });

  test('a KCP without the annotation is left alone; an annotated one fastplane cannot run gets InvalidSpec', async () => {
    const other = await object('other');
    assert.equal(other.metadata.finalizers, undefined, 'no finalizer');
    assert.equal(other.status, undefined, 'no status');
    assert.deepEqual(await controllerEvents(admin, 'other'), [], 'no Events');
    assert.ok(!env.controlPlanes().includes('other'), 'nothing stored for it');
    await apply('even', 2, true);
    const condition = await eventually('the InvalidSpec condition', async () => {
      const c = (await object('even')).status?.conditions?.find((x) => x.type === 'Available');
      return c?.reason === 'InvalidSpec' ? c : undefined;
    });
    assert.equal(condition.status, 'False');
    assert.match(condition.message ?? '', /spec\.replicas: must be odd with stacked etcd/);
    await admin.run(['delete', 'kcp', 'even', 'other', '--timeout=60s'], 70_000);
  });

  test('kubectl delete kcp/web tears the machines down, and the object goes only after', async () => {
    const members = pidsUnder(join(env.stateDir, 'clusters', 'web'));
    assert.ok(members.length > 0);
    await admin.run(['delete', 'kcp', 'web', '--timeout=120s'], 130_000);
    assert.deepEqual(members.filter(isRunning), [], 'no etcd process of web left once the object is gone');
    assert.ok(!env.controlPlanes().includes('web'));
  });

  test('a role without the kubeadmcontrolplanes verbs: the controller with --kubeadm-control-planes names them and exits 1', async () => {
    const role = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'fastplane-no-kcp' }, rules: controllerRules(CONTROL_PLANE_PERMISSIONS) };
    const file = join(env.stateDir, 'no-kcp.yaml');
    writeFileSync(file, stringify(role));
    await admin.run(['apply', '-f', file]);
    await admin.run(['create', 'serviceaccount', 'no-kcp', '-n', 'fastplane-system']);
    await admin.run(['create', 'clusterrolebinding', 'fastplane-no-kcp', '--clusterrole', 'fastplane-no-kcp', '--serviceaccount', 'fastplane-system:no-kcp']);
    const kubeconfig = await mgmt.accountKubeconfig('no-kcp', 'fastplane-system', 'no-kcp.kubeconfig');
    const run = await env.run(['controller', '--kubeconfig', kubeconfig, '--kubeadm-control-planes', '--metrics-address', '127.133.0.1:0', '--id', 'no-kcp']);
    assert.equal(run.code, 1, run.stderr);
    const missing = ['list kubeadmcontrolplanes', 'watch kubeadmcontrolplanes', 'patch kubeadmcontrolplanes', 'patch kubeadmcontrolplanes/status'].map((p) => `${p} (controlplane.cluster.x-k8s.io)`).join(', ');
    assert.ok(run.stderr.includes(`error: forbidden: the controller may not ${missing} on https://`), run.stderr);
  });

  after(async () => {
    if (controller.child.exitCode === null) {
      controller.child.kill('SIGTERM');
      const stopped = await controller.done;
      assert.equal(stopped.code, 0, stopped.stderr);
    }
    await mgmt.proxy.close();
    const down = await env.run(['down', 'mgmt']);
    assert.equal(down.code, 0, down.stderr);
  });
});

import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { statusOf, type CliEnv } from './cli.ts';
import { EndpointWriter } from './endpoint-traffic.ts';
import { assertRolloutWithinSkew, clientCertificateOf, sampleVersionsUntilStopped, type VersionSample } from './component-versions.ts';
import { kubectlFor, TEST_KUBERNETES_NEXT, type Kubectl, type Named } from './kubectl.ts';
import type { RowRun } from './matrix-scenario.ts';
import type { LabInfo } from './netlab.ts';
import { labPids, labProcesses } from './ssh-kubernetes.ts';

// The matrix's Kubernetes row: the control plane of the Kubernetes tests (etcd, kube-apiserver,
// controller-manager and scheduler on every machine, HAProxy as the endpoint) on the lab's hosts over
// SSH, driven as the row says. Up 3; kubectl through the endpoint and each apiserver; then, with a
// writer through the endpoint all along: scale 5, scale 3, the rollout one minor up with every
// component's version sampled on every host, a hung apiserver replaced, the etcd leader killed;
// kubectl through every apiserver again; down.

export interface KubernetesSite {
  env: CliEnv;
  lab: LabInfo;
}

const REPAIR_WITHIN_MS = 180_000;
/** Between two reads through the CLI while the controller works: each read is a command of about 0.8 CPU s. */
const POLL_EVERY_MS = 3_000;
/** Between two samples of every component's version: each asks three components on six hosts. */
const VERSIONS_EVERY_MS = 500;

function hostOf(url: string | null | undefined): string {
  return new URL(url ?? '').hostname;
}

/** Status documents until `done` holds one (the controller repairs alone; the CLI only reads). */
async function statusUntil(run: RowRun, what: string, done: (doc: ControlPlaneStatusDocument) => boolean): Promise<ControlPlaneStatusDocument> {
  const deadline = Date.now() + REPAIR_WITHIN_MS;
  for (;;) {
    const read = await run.cli(['status', run.name, '-o', 'json']);
    const doc = read.code === 0 ? statusOf(read.stdout) : undefined;
    if (doc !== undefined && done(doc)) return doc;
    if (Date.now() > deadline) {
      const last = doc === undefined ? read.stderr : JSON.stringify({ phase: doc.status.phase, machines: doc.status.machines.map((m) => [m.name, m.phase]), waits: doc.status.waits });
      assert.fail(`${what} not within ${String(REPAIR_WITHIN_MS / 1000)} s; last status: ${last}`);
    }
    await sleep(POLL_EVERY_MS);
  }
}

const settled = (replicas: number) => (doc: ControlPlaneStatusDocument): boolean =>
  doc.status.phase === 'Ready' && doc.status.readyReplicas === replicas && doc.status.conditions.find((c) => c.type === 'ControlPlaneComponentsHealthy')?.status === 'True';

/** Each apiserver answers /readyz, reads what was written through the endpoint, and writes what the endpoint reads back. */
async function throughEveryApiserver(run: RowRun, site: KubernetesSite, doc: ControlPlaneStatusDocument, endpoint: Kubectl, tag: string): Promise<void> {
  await endpoint.run(['create', 'configmap', `via-endpoint-${tag}`, '-n', 'tour']);
  const labAddresses = new Set(site.lab.hosts.map((h) => h.address));
  for (const machine of doc.status.machines) {
    assert.ok(labAddresses.has(hostOf(machine.clientURL)), `${machine.name} runs on a lab host`);
    const direct = await kubectlFor(site.env, run.name, machine.name, run.cli);
    assert.equal((await direct.run(['get', '--raw', '/readyz'])).trim(), 'ok', `${machine.name}'s apiserver is ready`);
    const names = (await direct.json<Named>(['get', 'configmaps', '-n', 'tour'])).items.map((item) => item.metadata.name);
    assert.ok(names.includes(`via-endpoint-${tag}`), `${machine.name} reads what was written through the endpoint`);
    await direct.run(['create', 'configmap', `via-${machine.name}-${tag}`, '-n', 'tour']);
  }
  const all = (await endpoint.json<Named>(['get', 'configmaps', '-n', 'tour'])).items.map((item) => item.metadata.name);
  for (const machine of doc.status.machines) assert.ok(all.includes(`via-${machine.name}-${tag}`), `the endpoint reads what ${machine.name}'s apiserver wrote`);
}

export async function kubernetesScenario(run: RowRun, site: KubernetesSite): Promise<void> {
  const { name, manifest, ok, step } = run;
  await step('up', () => ok('up', ['up', '-f', manifest, '--timeout', '400s', '-o', 'json']));
  let doc = await statusUntil(run, 'up settled at 3', settled(3));
  assert.equal(doc.status.kubernetes?.endpoint, `${site.lab.hosts.at(-1)?.address ?? ''}:6443`, 'the endpoint runs on its own lab host');
  const endpoint = await kubectlFor(site.env, name, undefined, run.cli);
  await endpoint.run(['create', 'namespace', 'tour']);
  await throughEveryApiserver(run, site, doc, endpoint, 'up');

  await endpoint.run(['create', 'namespace', 'writer']);
  const writer = new EndpointWriter(endpoint, 'writer');
  const writing = writer.run();
  let rolloutJudged: string;
  try {
    for (const replicas of [5, 3]) {
      // Exit 0 is the controller's converged pass; the status read after it is one more look, which a
      // loaded host can catch mid-probe, so it is read until it shows the settled cluster.
      await step(`scale ${String(replicas)}`, () => ok(`scale ${String(replicas)}`, ['scale', name, '--replicas', String(replicas), '--timeout', '400s', '-o', 'json']));
      doc = await statusUntil(run, `scale ${String(replicas)} settled`, settled(replicas));
    }

    // The rollout one minor up (surge machine first, old ones leave one at a time), every component's
    // version sampled on every machine host all along and held to the version skew policy.
    const client = clientCertificateOf(await endpoint.run(['config', 'view', '--raw']));
    const sampler = sampleVersionsUntilStopped(() => site.lab.hosts.slice(0, -1).map((h) => h.address), client, VERSIONS_EVERY_MS);
    let samples: VersionSample[];
    try {
      await step('rollout', () => ok('rollout', ['rollout', name, '--kubernetes-version', TEST_KUBERNETES_NEXT, '--timeout', '600s', '-o', 'json']));
    } finally {
      samples = await sampler.stop();
    }
    rolloutJudged = assertRolloutWithinSkew(samples, TEST_KUBERNETES_NEXT);
    doc = await statusUntil(run, 'rollout settled', (d) => settled(3)(d) && d.status.machines.every((m) => m.kubernetesVersion === TEST_KUBERNETES_NEXT));

    // A hung apiserver (SIGSTOP on its lab host): its machine is marked failed and replaced.
    const hung = statusOf((await ok('status', ['status', name, '-o', 'json'])).stdout).status.machines[1];
    assert.ok(hung?.clientURL, 'a machine whose apiserver to hang');
    const pids = labPids(site.lab, hostOf(hung.clientURL), 'kube-apiserver');
    assert.ok(pids.length > 0, `${hung.name}'s kube-apiserver runs`);
    for (const pid of pids) process.kill(pid, 'SIGSTOP');
    doc = await step('replace hung apiserver', () => statusUntil(run, `${hung.name} replaced`, (d) => settled(3)(d) && !d.status.machines.some((m) => m.name === hung.name)));
    const failed = (await run.events()).find((e) => e.action === 'MarkMachineFailed' && e.machine === hung.name);
    assert.equal(failed?.reason, 'APIServerUnhealthy', `${hung.name} was marked failed for its apiserver`);

    // The etcd leader killed on its lab host: the controller brings the member back (or replaces its
    // machine) and every apiserver serves again, reading and writing through its own member.
    const leader = doc.status.machines.find((m) => m.name === doc.status.leader);
    assert.ok(leader?.clientURL, `the etcd leader is one of the machines: ${String(doc.status.leader)}`);
    const etcdPids = labPids(site.lab, hostOf(leader.clientURL), 'etcd');
    assert.ok(etcdPids.length > 0, `${leader.name}'s etcd runs`);
    const killedAt = Date.now();
    for (const pid of etcdPids) process.kill(pid, 'SIGKILL');
    doc = await step('etcd leader killed', async () => {
      // Settled again only after the controller acted on that machine (a status read at once may predate its look).
      const repaired = async (): Promise<boolean> => (await run.events()).some((e) => e.machine === leader.name && Date.parse(e.startedAt) >= killedAt && e.result === 'ok' && ['RestartMember', 'MarkMachineFailed'].includes(e.action ?? ''));
      for (let seen = await repaired(); !seen; seen = await repaired()) {
        assert.ok(Date.now() - killedAt < REPAIR_WITHIN_MS, `the controller acted on ${leader.name} within ${String(REPAIR_WITHIN_MS / 1000)} s`);
        await sleep(POLL_EVERY_MS);
      }
      return statusUntil(run, `the cluster back after ${leader.name}'s etcd was killed`, settled(3));
    });

    await throughEveryApiserver(run, site, doc, endpoint, 'after');
  } finally {
    writer.stop();
    await writing;
  }

  const stored = new Set((await endpoint.json<Named>(['get', 'configmaps', '-n', 'writer'])).items.map((item) => item.metadata.name));
  const lost = writer.acked.filter((acked) => !stored.has(acked));
  console.log(`${name}: writes acknowledged ${String(writer.acked.length)}, failed ${String(writer.failures)}, longest failed-write window ${String(writer.longestOutageMs)} ms; rollout: ${rolloutJudged}`);
  assert.ok(writer.acked.length >= 10, `the writer kept writing (${String(writer.acked.length)} acknowledged)`);
  assert.deepEqual(lost, [], 'every acknowledged object is stored');
  const events = await run.events();
  for (const removal of events.filter((e) => e.action === 'RemoveMember' && e.result === 'ok')) {
    const stop = events.find((e) => e.action === 'StopComponents' && e.machine === removal.machine && e.result === 'ok');
    assert.ok(stop !== undefined && stop.startedAt < removal.startedAt, `${removal.machine ?? ''}: components stopped before its member was removed`);
  }

  await step('down', () => ok('down', ['down', name]));
  assert.deepEqual(labProcesses(site.lab), [], 'down leaves no process on any host');
}

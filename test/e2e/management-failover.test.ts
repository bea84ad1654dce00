import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { EventEntry } from '../../src/cli/commands/events.ts';
import { cliEnvFactory, isRunning, MEMBERSHIP_ACTIONS, type CliEnv } from '../support/cli.ts';
import { killReplica, startController, waitFor, type ControllerReplica } from '../support/controller-replica.ts';
import { recordedPid } from '../support/kubectl.ts';
import { applyObjects, eventually, managementCluster, type ManagementCluster, type ObjectJson } from '../support/management-cluster.ts';
import { overlappingChanges } from '../support/matrix-scenario.ts';

// Failover on a management cluster fastplane brought up itself: ControlPlane objects reconciled by
// controller replicas whose records and per-cluster Lease are in that cluster's API server
// (--store kubernetes), on a ServiceAccount token through a TCP proxy. The leading replica is
// SIGKILLed mid scale-up; then the API server itself is restarted mid-reconcile, its watch cut.

// Registered before the env factory's clean-up (hooks run in order): replicas stop by PID, then web's
// machines go through `down` while mgmt's API server still answers, then mgmt goes.
after(async () => {
  for (const replica of replicas.values()) await killReplica(replica);
  if (mgmt === undefined) return;
  const downWeb = await env.run([...storeFlags(mgmt.admin.kubeconfig), 'down', 'web']);
  await mgmt.proxy.close();
  const downMgmt = await env.run(['down', 'mgmt']);
  assert.equal(downWeb.code, 0, downWeb.stderr);
  assert.equal(downMgmt.code, 0, downMgmt.stderr);
});
const newEnv = cliEnvFactory();
const env: CliEnv = newEnv('127.134');
const NAMESPACE = 'fastplane-system';
/** `fastplane controller`'s default lease TTL: the Lease's leaseDurationSeconds (src/controller/controller.ts). */
const LEASE_DURATION_MS = 3_000;
/** How often a replica that does not lead a cluster tries its Lease: a third of the TTL (Controller.retryLeadMs). */
const RETRY_PERIOD_MS = 1_000;
const replicas = new Map<string, ControllerReplica>();
let mgmt: ManagementCluster | undefined;
let controllerKubeconfig = '';

const storeFlags = (kubeconfig: string): string[] => ['--store', 'kubernetes', '--kubeconfig', kubeconfig];

function cluster(): ManagementCluster {
  assert.ok(mgmt, 'the management cluster is up');
  return mgmt;
}

interface LeaseJson {
  spec: { holderIdentity?: string; leaseDurationSeconds?: number; acquireTime?: string; renewTime?: string; leaseTransitions?: number };
  metadata: { annotations?: Record<string, string> };
}

/** web's Lease and the controller --id holding it (none once released). */
async function webLease(): Promise<{ holder: string | undefined; spec: LeaseJson['spec'] }> {
  const lease = await cluster().admin.json<LeaseJson>(['get', 'lease', 'fastplane-cluster-web', '-n', NAMESPACE]);
  const record = lease.metadata.annotations?.['fastplane.dev/lease-record'];
  const holder = (lease.spec.holderIdentity ?? '') === '' || record === undefined ? undefined : (JSON.parse(record) as { holder: string }).holder;
  return { holder, spec: lease.spec };
}

/** web's events from the records in the API server, as `fastplane events -o json` prints them. */
async function webEvents(): Promise<EventEntry[]> {
  const run = await env.run([...storeFlags(cluster().admin.kubeconfig), 'events', 'web', '-o', 'json']);
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout) as EventEntry[];
}

/** Converged at `replicas` voters: the object's status says so for its current generation. */
async function convergedAt(replicas: number): Promise<ObjectJson | undefined> {
  const got = await cluster().admin.json<ObjectJson>(['get', 'fcp', 'web']);
  const s = got.status;
  return s?.observedGeneration === got.metadata.generation && s.replicas === replicas && s.readyReplicas === replicas && s.voters === replicas ? got : undefined;
}

function startReplica(id: string, n: number): ControllerReplica {
  const replica = startController(env, [...storeFlags(controllerKubeconfig), 'controller', '--id', id, '--metrics-address', `127.134.255.${String(n)}:0`, '--relist-every', '20s']);
  replicas.set(id, replica);
  return replica;
}

/** How many events of `action` a replica logged as done since `since`. */
function doneBy(replica: ControllerReplica, action: string, since: number): number {
  return replica.lines.filter((l) => l.event?.action === action && l.event.outcome === 'Succeeded' && l.event.at >= since).length;
}

const loggedDone = (replica: ControllerReplica, action: string, since: number): boolean => doneBy(replica, action, since) > 0;

/** The informer's reasons to list again, as a replica logged them since `since`. */
const relists = (replica: ControllerReplica, since = 0): string[] => replica.lines.filter((l) => l.time >= since && / listing again in \d+ ms$/.test(l.msg)).map((l) => l.msg);

/**
 * Relists a replica's informer blamed on the abort of a watch: only the informer aborts its own watch
 * (when it replaces it), and that is no trouble to relist for.
 */
const selfAborted = (replica: ControllerReplica): string[] => relists(replica).filter((msg) => msg.includes('aborted'));

/** Machine-scoped actions recorded as done more than once since `since`, as `action machine xN`. */
function doneTwice(events: readonly EventEntry[], since: number): string[] {
  const counts = new Map<string, number>();
  for (const e of events) {
    if (e.result !== 'ok' || e.action === null || e.machine === null || Date.parse(e.startedAt) < since) continue;
    const key = `${e.action} ${e.machine}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  return [...counts].filter(([, n]) => n > 1).map(([key, n]) => `${key} x${String(n)}`);
}

/** Machines created since `since` (CreateMachine done). */
function createdSince(events: readonly EventEntry[], since: number): string[] {
  return events.filter((e) => e.action === 'CreateMachine' && e.result === 'ok' && e.machine !== null && Date.parse(e.startedAt) >= since).map((e) => e.machine ?? '');
}

/** Each of `machines` joined exactly once: one AddLearner and one PromoteLearner done. */
function assertJoinedOnce(events: readonly EventEntry[], machines: readonly string[]): void {
  for (const machine of machines) {
    for (const action of ['AddLearner', 'PromoteLearner']) {
      const done = events.filter((e) => e.action === action && e.machine === machine && e.result === 'ok');
      assert.equal(done.length, 1, `${action} of ${machine} done once: ${JSON.stringify(done)}`);
    }
  }
}

before(async () => {
  mgmt = await managementCluster(env);
  // The kubernetes store's verbs in its namespace (docs/kubernetes-store.md, "RBAC"), beside what
  // `fastplane install` grants the controller's ServiceAccount.
  const subjects = [{ kind: 'ServiceAccount', name: 'fastplane-controller', namespace: NAMESPACE }];
  await applyObjects(env, mgmt.admin, 'store-role', [
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: { name: 'fastplane-store', namespace: NAMESPACE },
      rules: [
        { apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch', 'create', 'update', 'delete'] },
        { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'create', 'update'] },
        { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['get', 'create', 'update', 'delete'] },
      ],
    },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'fastplane-store', namespace: NAMESPACE }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'fastplane-store' }, subjects },
  ]);
  controllerKubeconfig = await mgmt.accountKubeconfig('fastplane-controller', NAMESPACE, 'controller.kubeconfig');
  startReplica('ctl-a', 1);
  startReplica('ctl-b', 2);
  await applyObjects(env, mgmt.admin, 'web', [{ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name: 'web', namespace: 'default' }, spec: { replicas: 3 } }]);
  await eventually('web at 3 voters', () => convergedAt(3), 120_000);
}, { timeout: 300_000 });

describe('failover of the controller on a management cluster brought up by fastplane', { timeout: 300_000 }, () => {
  test('the leading replica SIGKILLed mid scale-up 3 -> 5: the other takes the Lease within its duration and converges, one membership change at a time', async () => {
    const { spec: held } = await webLease();
    const scaledAt = Date.now();
    await cluster().admin.run(['scale', 'fcp/web', '--replicas', '5']);
    // Killed as soon as it logged the first AddLearner of the scale-up, before both learners are promoted.
    const [leaderId, leader] = await waitFor('the first learner of 3 -> 5', () => [...replicas].find(([, r]) => loggedDone(r, 'AddLearner', scaledAt)), 90_000, 20);
    const killedAt = Date.now();
    await killReplica(leader);
    assert.ok(doneBy(leader, 'PromoteLearner', scaledAt) < 2, 'killed mid scale-up');
    const [otherId, other] = [...replicas].find(([id]) => id !== leaderId) ?? [];
    assert.ok(otherId && other);
    // The killed holder's last renewal, while the Lease still names it; else the kill (later, so a looser bound).
    const left = await webLease();
    const lastRenewal = left.holder === leaderId ? Date.parse(left.spec.renewTime ?? '') : killedAt;

    const taken = await eventually(`${otherId} to take the Lease`, async () => {
      const lease = await webLease();
      return lease.holder === otherId ? lease.spec : undefined;
    });
    // client-go's leader election (docs/management-cluster.md, "Failover"): a Lease not renewed for
    // leaseDurationSeconds is taken by the next candidate's try, one retry period apart.
    const gapMs = Date.parse(taken.acquireTime ?? '') - lastRenewal;
    assert.equal(taken.leaseDurationSeconds, LEASE_DURATION_MS / 1000);
    assert.ok(gapMs <= LEASE_DURATION_MS + RETRY_PERIOD_MS, `taken ${String(gapMs)} ms after the killed holder's last renewal`);
    assert.equal(taken.leaseTransitions, (held.leaseTransitions ?? 0) + 1, 'one change of holder');

    await eventually('web at 5 voters', () => convergedAt(5), 120_000);
    assert.ok(loggedDone(other, 'PromoteLearner', killedAt), `${otherId} finished the scale-up itself`);
    const events = await webEvents();
    assert.deepEqual(overlappingChanges(events), [], 'never two membership changes at once');
    const added = createdSince(events, scaledAt);
    assert.equal(added.length, 2, `two machines created for 3 -> 5: ${added.join(', ')}`);
    assertJoinedOnce(events, added);
    assert.deepEqual(doneTwice(events, scaledAt), []);
    assert.deepEqual(selfAborted(other), [], 'no relist for an abort of its own');
    console.log(JSON.stringify({ takeover: { from: leaderId, to: otherId, msAfterLastRenewal: left.holder === leaderId ? gapMs : null, msAfterKill: Date.parse(taken.acquireTime ?? '') - killedAt } }));
  });

  test('the management API server restarted mid scale-up 5 -> 7, its watch cut: the controller resumes with no action done twice', async () => {
    const survivor = [...replicas.values()].find((r) => r.child.exitCode === null && r.child.signalCode === null);
    assert.ok(survivor, 'a replica runs');
    const machine = env.machines('mgmt')[0]?.name ?? '';
    const apiserver = recordedPid(env, 'mgmt', machine, 'kube-apiserver');
    const scaledAt = Date.now();
    await cluster().admin.run(['scale', 'fcp/web', '--replicas', '7']);
    await waitFor('the first learner of 5 -> 7', () => (loggedDone(survivor, 'AddLearner', scaledAt) ? true : undefined), 90_000, 20);

    // Mid-reconcile: the API server killed by its PID, and every connection through the proxy reset.
    const stoppedAt = Date.now();
    process.kill(apiserver, 'SIGKILL');
    assert.ok(cluster().proxy.cut() > 0, 'the controller had connections open');
    assert.ok(doneBy(survivor, 'PromoteLearner', scaledAt) < 2, 'killed mid scale-up');
    await waitFor('the kube-apiserver to exit', () => (isRunning(apiserver) ? undefined : true), 60_000);
    // Started again by fastplane itself: a pass over mgmt finds its apiserver down and starts it
    // (StartComponent through the local provider, as recorded for the machine).
    const up = await env.run(['up', '--name', 'mgmt', '--timeout', '120s']);
    assert.equal(up.code, 0, up.stderr);
    const restarted = recordedPid(env, 'mgmt', machine, 'kube-apiserver');
    assert.notEqual(restarted, apiserver);
    assert.ok(isRunning(restarted), 'the new kube-apiserver runs');
    assert.ok(env.events('mgmt').some((e) => e.action === 'StartComponent' && e.machine === machine && e.outcome === 'Succeeded' && e.at >= stoppedAt), 'started again by a StartComponent of mgmt');

    await eventually('web at 7 voters', () => convergedAt(7), 150_000);
    assert.ok(relists(survivor, stoppedAt).length > 0, 'the informer listed again after its watch ended');
    assert.deepEqual(selfAborted(survivor), [], 'no relist for an abort of its own');
    assert.ok(survivor.child.exitCode === null && survivor.child.signalCode === null, 'the controller ran on through the outage');
    const events = await webEvents();
    const added = createdSince(events, scaledAt);
    assert.equal(added.length, 2, `two machines created for 5 -> 7: ${added.join(', ')}`);
    assertJoinedOnce(events, added);
    assert.deepEqual(doneTwice(events, scaledAt), [], 'each action on each machine done once');
    assert.deepEqual(overlappingChanges(events), [], 'never two membership changes at once');
    assert.ok(events.some((e) => e.action !== null && MEMBERSHIP_ACTIONS.has(e.action) && Date.parse(e.startedAt) > stoppedAt), 'membership changes went on after the restart');
  });
});

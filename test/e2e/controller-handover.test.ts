import assert from 'node:assert/strict';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultControlPlane, validateControlPlane } from '../../src/api/control-plane.ts';
import type { Etcd3Admin } from '../../src/adapters/etcd/etcd3-admin.ts';
import { EtcdStateStore } from '../../src/adapters/stores/etcd-state-store.ts';
import type { EventRecord } from '../../src/domain/machine.ts';
import { FencedOutError, type WriterLease } from '../../src/ports/state-store.ts';
import { cliEnvFactory, learnerLimitOf, MEMBERSHIP_ACTIONS } from '../support/cli.ts';
import { ClusterWatch } from '../support/cluster-watch.ts';
import { httpGet, killReplica, startController, waitFor, type ControllerLine, type ControllerReplica } from '../support/controller-replica.ts';
import { adminFor, type ClusterAccess } from '../support/etcd-direct.ts';

/**
 * Controller replicas hand a cluster over on real etcd, with their records in an etcd store that is
 * itself a control plane fastplane brought up (README, "Running as a controller"). The leader of
 * cluster X is killed at different moments of its work and, once, stopped past the lease TTL; from
 * outside (logs, the store, etcd's own member list) the test checks that another replica takes over
 * within 5 s, that no membership change of X overlaps another and no machine is created twice, and
 * that a resumed replica does nothing more to X. The handover times are printed as JSON.
 */

// Registered before the env factory's own clean-up (hooks run in order): processes by PID first,
// through `down` while the store still answers, then the factory kills what is left and removes dirs.
after(async () => {
  await teardown();
});

const newEnv = cliEnvFactory();
/** The management control plane: the store of every replica, in its own state dir (SQLite). */
const mgmtEnv = newEnv('127.200');
/** The replicas' state dir: X's machines live here, its records in mgmt. */
const env = newEnv('127.201');
const X = 'x';
const TTL_MS = 3_000;
/** Three replicas at any time; each replica started gets the next of these metrics addresses. */
const metricsAddress = (n: number): string => `127.209.0.${String(n)}:9464`;

interface Handover {
  moment: string;
  signal: 'SIGKILL' | 'SIGSTOP';
  from: string;
  to: string;
  /** From the signal (the test's clock) to the line in which the new leader took the lease, before its first pass. */
  ms: number;
}

let storeArgs: string[] = [];
let store: EtcdStateStore | undefined;
let watch: ClusterWatch | undefined;
let xAdmin: Etcd3Admin | undefined;
/** Every replica started, by id; killed ones stay for their log lines. */
const replicas = new Map<string, ControllerReplica>();
const handovers: Handover[] = [];

async function teardown(): Promise<void> {
  // For a failure's post-mortem: X's records and every replica's log lines, as JSON in this file.
  const dump = process.env.FASTPLANE_HANDOVER_DUMP;
  if (dump !== undefined && dump !== '') {
    writeFileSync(dump, JSON.stringify({ events: store ? await store.listEvents(X) : [], machines: store ? await store.listMachines(X) : [], cp: await store?.getControlPlane(X), replicas: Object.fromEntries([...replicas].map(([id, r]) => [id, r.lines])), handovers }, null, 1));
  }
  await watch?.stop();
  await xAdmin?.close();
  for (const replica of replicas.values()) await killReplica(replica);
  await store?.close();
  // X's members and mgmt's stop by PID through down (X's lease holder is gone: down takes it).
  if (storeArgs.length > 0) await env.run([...storeArgs, 'down', X, '--force', '--wait', '1s']);
  await mgmtEnv.run(['down', 'mgmt', '--force', '--wait', '1s']);
}

function theStore(): EtcdStateStore {
  assert.ok(store, 'the store is open');
  return store;
}

function startReplica(): string {
  const n = replicas.size + 1;
  const id = `ctl-${String(n)}`;
  replicas.set(id, startController(env, [...storeArgs, 'controller', '--id', id, '--metrics-address', metricsAddress(n), '--max-concurrent-reconciles', '4']));
  return id;
}

const alive = (replica: ControllerReplica): boolean => replica.child.exitCode === null && replica.child.signalCode === null;

async function events(): Promise<EventRecord[]> {
  return theStore().listEvents(X);
}

/**
 * Stores X's spec as any client of the store would, without running up or scale: those would follow
 * the leading replica and take the lease over themselves when it dies, competing with the replicas.
 */
async function storeSpec(replicaCount: number): Promise<{ generation: number; storedAt: number }> {
  const base = defaultControlPlane(X);
  // Short provisioning keeps the file fast; long enough that a kill can land while machines provision.
  const manifest = validateControlPlane({ ...base, spec: { ...base.spec, replicas: replicaCount, provider: { ...base.spec.provider, provisioningDelay: '2s-3s' } } });
  const storedAt = Date.now();
  return { generation: (await theStore().applySpec(manifest, storedAt)).record.generation, storedAt };
}

async function converged(generation: number): Promise<true | undefined> {
  const pass = (await theStore().getControlPlane(X))?.lastPass;
  return pass?.generation === generation && pass.converged ? true : undefined;
}

async function leaderOfX(): Promise<{ id: string; replica: ControllerReplica; lease: WriterLease }> {
  const lease = await theStore().getLease(X);
  const replica = lease && replicas.get(lease.holder);
  assert.ok(lease && replica && alive(replica), `a live replica leads ${X} (lease: ${lease?.holder ?? 'none'})`);
  return { id: lease.holder, replica, lease: { cluster: X, token: lease.token } };
}

/** The first line, at or after `since`, in which a replica other than `except` took X's lease. */
function takeover(since: number, except: string): { id: string; line: ControllerLine } | undefined {
  let first: { id: string; line: ControllerLine } | undefined;
  for (const [id, replica] of replicas) {
    if (id === except) continue;
    const line = replica.lines.find((l) => l.time >= since && l.cluster === X && l.msg === `lease on ${X} taken by ${id}`);
    if (line && (!first || line.time < first.line.time)) first = { id, line };
  }
  return first;
}

async function killLeader(moment: string): Promise<void> {
  const { id: from, replica } = await leaderOfX();
  const killedAt = Date.now();
  replica.child.kill('SIGKILL');
  const to = await waitFor(`a replica to take ${X} over after a kill ${moment}`, () => takeover(killedAt, from), 20_000, 50);
  handovers.push({ moment, signal: 'SIGKILL', from, to: to.id, ms: to.line.time - killedAt });
  // The lease record agrees (another replica may lead by now if this one's renewals stalled: never the killed one).
  assert.notEqual((await theStore().getLease(X))?.holder ?? from, from, 'the lease record names another replica');
  await replica.done;
  // Three replicas again before the next kill.
  startReplica();
}

/** Waits, polling X's events, for one that matches; returns it. */
async function nextEvent(what: string, match: (event: EventRecord) => boolean): Promise<EventRecord> {
  return waitFor(what, async () => (await events()).find(match), 120_000, 50);
}

function xAccess(endpoints: string[]): ClusterAccess {
  const pki = join(env.stateDir, 'clusters', X, 'pki');
  return { endpoints, tls: { caFile: join(pki, 'ca.crt'), certFile: join(pki, 'client.crt'), keyFile: join(pki, 'client.key') } };
}

async function voterURLs(): Promise<string[]> {
  return (await theStore().listMachines(X)).flatMap((m) => (m.phase === 'Voter' && m.clientURL !== undefined ? [m.clientURL] : []));
}

const describeEvent = (e: EventRecord): string => `${e.action ?? e.reason} ${e.machine ?? ''} [${String(e.at)}..${String(e.endedAt ?? e.at)}]`;

/** What fastplane's events and etcd's own member lists say about X's membership so far. */
async function assertMembershipSerialized(): Promise<void> {
  const all = await events();
  const changes = all.filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action)).sort((a, b) => a.at - b.at);
  for (let i = 1; i < changes.length; i++) {
    const previous = changes[i - 1];
    const change = changes[i];
    assert.ok(previous && change);
    assert.ok(change.at >= (previous.endedAt ?? previous.at), `${describeEvent(change)} started before ${describeEvent(previous)} ended`);
  }
  // A name comes back once its machine is gone (the lowest free ordinal is reused): created again
  // only after a deletion of it was recorded.
  const exists = new Set<string>();
  for (const e of all) {
    if (e.outcome !== 'Succeeded' || e.machine === undefined) continue;
    if (e.action === 'CreateMachine') {
      assert.ok(!exists.has(e.machine), `${describeEvent(e)}: machine created twice`);
      exists.add(e.machine);
    }
    if (e.action === 'DeleteMachine') exists.delete(e.machine);
  }
  assert.ok(watch && watch.samples.length > 0, "X's member list sampled");
  const limit = learnerLimitOf(await theStore().listMachines(X));
  assert.deepEqual(watch.samples.filter((s) => s.learners > limit), [], `etcd never had more than ${String(limit)} learners`);
}

const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
};

before(async () => {
  mkdirSync(env.stateDir, { recursive: true });
  const up = await mgmtEnv.run(['up', '--name', 'mgmt', '--replicas', '3']);
  assert.equal(up.code, 0, up.stderr);
  const endpoints = await mgmtEnv.run(['endpoints', 'mgmt', '-o', 'json']);
  assert.equal(endpoints.code, 0, endpoints.stderr);
  const access = JSON.parse(endpoints.stdout) as { endpoints: string[]; cacert: string; cert: string; key: string };
  storeArgs = ['--store', 'etcd', '--etcd-endpoints', access.endpoints.join(','), '--etcd-cacert', access.cacert, '--etcd-cert', access.cert, '--etcd-key', access.key];
  store = new EtcdStateStore({ endpoints: access.endpoints, tls: { caFile: access.cacert, certFile: access.cert, keyFile: access.key } });
  for (let n = 1; n <= 3; n++) startReplica();
  for (let n = 1; n <= 3; n++) {
    await waitFor(`replica ${String(n)} /healthz`, async () => ((await httpGet(`http://${metricsAddress(n)}/healthz`))?.status === 200 ? true : undefined), 30_000);
  }
});

describe('controller replicas hand a cluster over on real etcd, records in a fastplane-made etcd store', () => {
  test('SIGKILL of the leading replica at six moments of 0 -> 5, 5 -> 3 and 3 -> 5: taken over in under 5 s, changes one at a time, machines created once', async () => {
    const { generation } = await storeSpec(5);

    await waitFor('machines of X provisioning', async () => ((await theStore().listMachines(X)).some((m) => m.phase === 'Provisioning') ? true : undefined), 60_000, 50);
    assert.ok(!(await events()).some((e) => e.action === 'InitCluster'), 'killed before the init');
    await killLeader('while the machines provision, before the init');

    const init = await nextEvent('the init', (e) => e.action === 'InitCluster' && e.outcome === 'Succeeded');
    await killLeader('right after the init member started');
    const initURL = (await theStore().listMachines(X)).find((m) => m.name === init.machine)?.clientURL;
    assert.ok(initURL, 'the init machine has a client URL');
    // From here on, X's member list straight from etcd, sampled while it changes.
    watch = new ClusterWatch(xAccess([initURL]));
    watch.start();

    // Straight from etcd, every 50 ms: a learner added and not yet promoted.
    xAdmin = adminFor(xAccess([]), { callTimeoutMs: 800 });
    const admin = xAdmin;
    await waitFor('a learner catching up', async () => ((await admin.memberList(await voterURLs()).catch(() => [])).some((m) => m.isLearner) ? true : undefined), 120_000, 50);
    await killLeader('while a learner catches up');

    const seen = (await events()).at(-1)?.seq ?? 0;
    await nextEvent('a promotion', (e) => e.action === 'PromoteLearner' && e.outcome === 'Succeeded' && (e.seq ?? 0) > seen);
    await killLeader('right after a promotion');
    await waitFor(`0 -> 5 converged (generation ${String(generation)})`, () => converged(generation), 180_000);

    const down = await storeSpec(3);
    await nextEvent('a removal', (e) => e.action === 'RemoveMember' && e.outcome === 'Succeeded' && e.at >= down.storedAt);
    await killLeader('right after a member was removed, before its machine is deleted');
    await waitFor('5 -> 3 converged', () => converged(down.generation), 120_000);

    const upAgain = await storeSpec(5);
    await nextEvent('a machine created for 3 -> 5', (e) => e.action === 'CreateMachine' && e.at >= upAgain.storedAt);
    await killLeader('while the new machines provision beside 3 voters');
    await waitFor('3 -> 5 converged', () => converged(upAgain.generation), 180_000);

    await assertMembershipSerialized();
    const voters = (await admin.memberList(await voterURLs())).filter((m) => !m.isLearner);
    assert.equal(voters.length, 5, 'etcd has 5 voters');
    for (const h of handovers) assert.ok(h.ms < 5_000, `${h.moment}: taken over in ${String(h.ms)} ms`);
  });

  test('SIGSTOP past the TTL: another replica takes over; resumed, the old leader acts no more on X and its writes are refused', async () => {
    const down = await storeSpec(3);
    await nextEvent('the scale-down under way', (e) => (e.action === 'RemoveMember' || e.action === 'MoveLeader') && e.outcome === 'Succeeded' && e.at >= down.storedAt);
    const { id: from, replica: stopped, lease: stale } = await leaderOfX();
    const stoppedAt = Date.now();
    stopped.child.kill('SIGSTOP');
    const to = await waitFor(`a replica to take ${X} over from the stopped one`, () => takeover(stoppedAt, from), 20_000, 50);
    const ms = to.line.time - stoppedAt;
    handovers.push({ moment: 'leader stopped (SIGSTOP) during 5 -> 3', signal: 'SIGSTOP', from, to: to.id, ms });
    // Alive but silent: nobody may take the lease before its last renewal (at most a renew interval before the stop) expired.
    assert.ok(ms >= TTL_MS - TTL_MS / 5 - 100, `not taken from a live holder before its TTL: ${String(ms)} ms`);
    await sleep(Math.max(0, stoppedAt + TTL_MS + 2_000 - Date.now()));

    const resumedAt = Date.now();
    stopped.child.kill('SIGCONT');
    const noticed = await waitFor(
      'the resumed replica to notice it lost X',
      () => stopped.lines.find((l) => l.time >= resumedAt && l.cluster === X && (l.msg.startsWith(`lease on ${X} lost`) || l.msg.startsWith(`stopped leading ${X}`))),
      15_000,
      100,
    );
    // A write under the old leader's token, as its resumed pass would send it: the store refuses it.
    const write = { kind: 'AppendEvent' as const, event: { cluster: X, at: Date.now(), type: 'Normal' as const, reason: 'Stale', message: 'from a stale leader' } };
    await assert.rejects(theStore().commit(stale, [write]), FencedOutError);
    await waitFor('5 -> 3 converged under the new leader', () => converged(down.generation), 120_000);

    const late = stopped.lines.filter((l) => l.time >= resumedAt && l.event !== undefined);
    assert.deepEqual(late, [], 'no event recorded by the resumed replica');
    // Every event of X since the resume was recorded, and logged, by another replica.
    for (const e of (await events()).filter((ev) => ev.at >= resumedAt)) {
      const by = [...replicas].filter(([id, r]) => id !== from && r.lines.some((l) => l.event?.at === e.at && l.event.message === e.message));
      assert.equal(by.length, 1, `${describeEvent(e)} logged by exactly one other replica`);
    }
    assert.ok(alive(stopped), 'the resumed replica runs on');
    assert.notEqual((await theStore().getLease(X))?.holder, from);
    console.log(`resumed ${from} noticed ${String(noticed.time - resumedAt)} ms after SIGCONT: ${noticed.msg}`);
    await assertMembershipSerialized();
  });

  test('scale on the etcd store follows the leading replica to the end', async () => {
    const { id } = await leaderOfX();
    const run = await env.run([...storeArgs, 'scale', X, '--replicas', '1', '--timeout', '120s']);
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stderr, new RegExp(`ctl-\\d+ is reconciling ${X}`), 'scale followed a replica');
    assert.equal((await leaderOfX()).id, id, 'the replica kept the lease');
    await assertMembershipSerialized();
  });

  test('handover times as JSON', () => {
    const killed = handovers.filter((h) => h.signal === 'SIGKILL').map((h) => h.ms);
    const stoppedMs = handovers.filter((h) => h.signal === 'SIGSTOP').map((h) => h.ms);
    assert.ok(killed.length >= 5, `at least 5 kills, got ${String(killed.length)}`);
    const summary = {
      etcdVersion: defaultControlPlane(X).spec.version,
      leaseTtlMs: TTL_MS,
      sigkill: { count: killed.length, medianMs: median(killed), maxMs: Math.max(...killed) },
      sigstop: { count: stoppedMs.length, medianMs: median(stoppedMs), maxMs: Math.max(...stoppedMs) },
      handovers,
    };
    console.log(JSON.stringify(summary));
  });
});

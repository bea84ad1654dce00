import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultControlPlane, validateControlPlane } from '../../src/api/control-plane.ts';
import { EtcdStateStore } from '../../src/adapters/stores/etcd-state-store.ts';
import { EtcdEndpoints } from '../../src/adapters/stores/etcd-store-client.ts';
import { SqliteStateStore } from '../../src/adapters/stores/sqlite-state-store.ts';
import type { StateStore } from '../../src/ports/state-store.ts';
import { cliEnvFactory, type CliEnv } from '../support/cli.ts';
import { clockOffsetEnv, killReplica, startController, waitFor, type ControllerReplica } from '../support/controller-replica.ts';
import { startSingleEtcd, type SingleEtcd } from '../support/single-etcd.ts';

// Two controller replicas share a store; one runs with its clock 2 s ahead (Debian's faketime). A
// lease is judged on the store's clock only (etcd's lease TTL; SQLite's host boot clock), so the
// skewed replica never takes the lease while the other renews it, and takes it once the holder stops.

const started: { replicas: ControllerReplica[]; etcd?: SingleEtcd; records?: StateStore }[] = [];
// Registered before the env factory's own clean-up: replicas stopped by PID, then the store.
after(async () => {
  for (const run of started) {
    for (const replica of run.replicas) await killReplica(replica);
    await run.records?.close();
    await run.etcd?.stop();
  }
});

const newEnv = cliEnvFactory();
const CLUSTER = 'skew';
const SKEW = '+2s';
/** Shorter than the skew: a replica that judged the holder's renewals on its own clock would see them expired. */
const TTL = '1.5s';
/** Several TTLs of the holder renewing while the skewed replica watches. */
const WINDOW_MS = 6_000;
/** Records dated further ahead of this process's clock than this were written by the skewed replica. */
const AHEAD_MS = 1_000;

/** A cluster whose machines take an hour to provision: its holder keeps renewing, no etcd member starts. */
async function storeCluster(records: StateStore): Promise<void> {
  const base = defaultControlPlane(CLUSTER);
  await records.applySpec(validateControlPlane({ ...base, spec: { ...base.spec, replicas: 1, provider: { ...base.spec.provider, provisioningDelay: '1h' } } }), Date.now());
}

async function holderOf(records: StateStore): Promise<string | undefined> {
  return (await records.getLease(CLUSTER))?.holder;
}

/**
 * Replica `steady` leads; `skewed` starts with its clock ahead. Over the window the lease keeps the
 * steady holder's token and nothing in the store is dated ahead (the skewed replica never writes as
 * holder); once the holder is stopped (SIGSTOP: its process still exists, so only expiry frees the
 * lease), the skewed replica takes it, and its own records show its clock is indeed ahead.
 */
async function skewedReplicaWaits(env: CliEnv, storeArgs: string[], records: StateStore, run: { replicas: ControllerReplica[] }, metricsHost: string): Promise<void> {
  mkdirSync(env.stateDir, { recursive: true });
  await storeCluster(records);
  const controller = (id: string, n: number, extraEnv: Record<string, string> = {}): ControllerReplica => {
    const replica = startController(env, ['--lease-ttl', TTL, ...storeArgs, 'controller', '--id', id, '--metrics-address', `${metricsHost}.${String(n)}:9464`], extraEnv);
    run.replicas.push(replica);
    return replica;
  };
  const steady = controller('steady', 1);
  await waitFor('the steady replica to take the lease', async () => ((await holderOf(records)) === 'steady' ? true : undefined), 60_000);
  const token = (await records.getLease(CLUSTER))?.token;
  const skewed = controller('skewed', 2, clockOffsetEnv(SKEW));
  await waitFor('the skewed replica to start', () => (skewed.lines.some((line) => line.msg.startsWith('controller skewed started')) ? true : undefined), 60_000);

  let seenEvents = (await records.listEvents(CLUSTER)).length;
  const windowEnd = Date.now() + WINDOW_MS;
  while (Date.now() < windowEnd) {
    const lease = await records.getLease(CLUSTER);
    const now = Date.now();
    assert.equal(lease?.holder, 'steady', 'the steady replica keeps the lease');
    assert.equal(lease.token, token, 'never taken over, not even for a moment');
    assert.ok(lease.renewedAt <= now + AHEAD_MS, `the lease record was written ${String(lease.renewedAt - now)} ms ahead: by the skewed replica`);
    const events = await records.listEvents(CLUSTER);
    for (const event of events.slice(seenEvents)) {
      assert.ok(event.at <= now + AHEAD_MS, `event ${event.reason} is dated ${String(event.at - now)} ms ahead: written by the skewed replica`);
    }
    seenEvents = events.length;
    await sleep(100);
  }
  assert.ok(skewed.child.exitCode === null && steady.child.exitCode === null, 'both replicas ran through the window');
  assert.ok(!skewed.lines.some((line) => line.msg === `lease on ${CLUSTER} taken by skewed`), 'the skewed replica never logged taking the lease');

  // The holder stops renewing but its process remains: no proof it is gone, so the lease expires first.
  steady.child.kill('SIGSTOP');
  await waitFor('the skewed replica to take the lease', async () => ((await holderOf(records)) === 'skewed' ? true : undefined), 60_000);
  // It acts as holder now: the lease it renews is dated on its own clock, ahead of this process's.
  await waitFor('a renewal dated on the skewed clock', async () => {
    const lease = await records.getLease(CLUSTER);
    return lease !== undefined && lease.renewedAt > Date.now() + AHEAD_MS ? true : undefined;
  }, 10_000, 100);
}

describe('a lease is judged on the store clock: a replica whose clock runs ahead never takes a live lease', () => {
  test('etcd store', async () => {
    const env = newEnv('127.174');
    const run: (typeof started)[number] = { replicas: [] };
    started.push(run);
    run.etcd = await startSingleEtcd('127.174.0.240');
    const records = new EtcdStateStore({ endpoints: [run.etcd.endpoint] });
    run.records = records;
    await skewedReplicaWaits(env, ['--store', 'etcd', '--etcd-endpoints', run.etcd.endpoint, '--insecure-store'], records, run, '127.174.0');
  });

  test('SQLite store (one host: its boot clock, which faketime does not move)', async () => {
    const env = newEnv('127.175');
    const run: (typeof started)[number] = { replicas: [] };
    started.push(run);
    mkdirSync(env.stateDir, { recursive: true });
    const records = new SqliteStateStore(join(env.stateDir, 'fastplane.db'));
    run.records = records;
    await skewedReplicaWaits(env, [], records, run, '127.175.0');
  });
});

test("etcd's own clock: a keep-alive of an expired or revoked lease answers TTL 0, and a put under it is refused", async () => {
  const run: (typeof started)[number] = { replicas: [] };
  started.push(run);
  run.etcd = await startSingleEtcd('127.174.0.241');
  const etcd = new EtcdEndpoints({ endpoints: [run.etcd.endpoint] });
  try {
    const key = Buffer.from('k');
    const granted = await etcd.write((client) => client.leaseClient.leaseGrant({ TTL: 1 }));
    assert.equal(granted.TTL, '2', "raised to etcd's minimum at the default election timeout");
    await etcd.write((client) => client.kv.put({ key, value: Buffer.from('v'), lease: granted.ID }));
    assert.equal(await etcd.keepAlive(granted.ID), true);
    await waitFor('etcd to expire the lease and delete its key', async () => ((await etcd.read((client) => client.kv.range({ key }))).kvs.length === 0 ? true : undefined), 10_000, 50);
    assert.equal(await etcd.keepAlive(granted.ID), false, 'expired');
    const revoked = await etcd.write((client) => client.leaseClient.leaseGrant({ TTL: 10 }));
    await etcd.write((client) => client.leaseClient.leaseRevoke({ ID: revoked.ID }));
    assert.equal(await etcd.keepAlive(revoked.ID), false, 'revoked');
    await assert.rejects(etcd.write((client) => client.kv.put({ key, value: Buffer.from('v'), lease: revoked.ID })), /requested lease not found/);
  } finally {
    etcd.close();
  }
});

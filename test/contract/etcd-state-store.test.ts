import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { EtcdStateStore } from '../../src/adapters/stores/etcd-state-store.ts';
import { openKvClient } from '../../src/adapters/etcd/etcd3-admin.ts';
import { defaultControlPlane } from '../../src/api/control-plane.ts';
import { startSingleEtcd, type SingleEtcd } from '../support/single-etcd.ts';
import { defineStateStoreContract } from './state-store-contract.ts';

// One etcd for the whole file; each case has its own key prefix, so cases never see each other's records.
const ADDRESS = '127.160.0.1';
let etcd: SingleEtcd | undefined;
let cases = 0;

before(async () => {
  etcd = await startSingleEtcd(ADDRESS);
});
after(async () => {
  await etcd?.stop();
});

function endpoint(): string {
  if (etcd === undefined) throw new Error('etcd did not start');
  return etcd.endpoint;
}

defineStateStoreContract('etcd', () => {
  const prefix = `/contract-${String(++cases)}/`;
  const open = () => new EtcdStateStore({ endpoints: [endpoint()], prefix });
  const store = open();
  return { store, connect: open, cleanup: () => store.close() };
});

describe('EtcdStateStore', () => {
  test('records are JSON under the prefix; a holder that stops renewing loses its lease key with its etcd lease', async () => {
    const prefix = '/layout/';
    const store = new EtcdStateStore({ endpoints: [endpoint()], prefix });
    const kv = openKvClient([endpoint()]);
    try {
      await store.applySpec(defaultControlPlane('alpha'), 1_000);
      const stored = JSON.parse((await kv.get('/layout/control-planes/alpha').string()) ?? 'null') as { name?: string; generation?: number };
      assert.deepEqual([stored.name, stored.generation], ['alpha', 1]);
      assert.equal(await store.acquireLease('alpha', { token: 't', holder: 'h', host: 'elsewhere', pid: 1, ttlMs: 1_000 }, Date.now()), true);
      const leaseKey = await kv.get('/layout/leases/alpha').exec();
      const etcdLease = leaseKey.kvs[0]?.lease;
      assert.ok(etcdLease !== undefined && etcdLease !== '0', 'the lease key is attached to an etcd lease');
      const ttl = await kv.leaseClient.leaseTimeToLive({ ID: etcdLease });
      assert.ok(Number(ttl.grantedTTL) <= 2, `granted TTL follows ttlMs (etcd's minimum aside): ${ttl.grantedTTL}`);
      // Nobody renews it: etcd removes the key by itself, and another holder may take the lease.
      await kv.leaseClient.leaseRevoke({ ID: etcdLease });
      assert.equal(await store.getLease('alpha'), undefined);
      assert.equal(await store.acquireLease('alpha', { token: 'u', holder: 'h2', host: 'elsewhere', pid: 2, ttlMs: 10_000 }, Date.now()), true);
    } finally {
      kv.close();
      await store.close();
    }
  });

  test('putDocuments is one transaction: a batch etcd refuses (more operations than --max-txn-ops) stores none of it', async () => {
    const store = new EtcdStateStore({ endpoints: [endpoint()], prefix: '/batch/' });
    try {
      await store.putDocuments('local-process/c', [{ key: 'files', value: 'generation 1' }], []);
      const puts = Array.from({ length: 200 }, (_, i) => ({ key: `file/${String(i)}`, value: String(i) }));
      await assert.rejects(store.putDocuments('local-process/c', [...puts, { key: 'files', value: 'generation 2' }], []));
      assert.deepEqual(await store.listDocuments('local-process/c'), [{ key: 'files', value: 'generation 1' }]);
    } finally {
      await store.close();
    }
  });

  test('an unreachable etcd is a clear error, not a hang', async () => {
    const store = new EtcdStateStore({ endpoints: ['http://127.160.0.2:2379'], callTimeoutMs: 1000 });
    try {
      await assert.rejects(store.listControlPlanes(), /etcd store unreachable at http:\/\/127\.160\.0\.2:2379/);
    } finally {
      await store.close();
    }
  });
});

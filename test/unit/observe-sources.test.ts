import assert from 'node:assert/strict';
import { setImmediate } from 'node:timers/promises';
import { test } from 'node:test';
import type { ControlPlaneRecord, MachineRecord } from '../../src/domain/machine.ts';
import { observe } from '../../src/cluster/observe.ts';
import type { CarePort } from '../../src/ports/care.ts';
import type { EtcdAdmin } from '../../src/ports/etcd-admin.ts';
import type { ControlPlaneEndpoint, InfraProvider, KubernetesMachines } from '../../src/ports/machine-provider.ts';
import type { Logger } from '../../src/ports/logger.ts';
import type { StateStore } from '../../src/ports/state-store.ts';

// A pass reads each source once: the provider's machines, the endpoint's routes and care together (none
// needs another's answer), etcd after them. A failed routes or care read is logged and kept as data.

const ENDPOINT = '127.0.0.1:6443';
const machine: MachineRecord = { cluster: 'k', name: 'k-1', ordinal: 1, version: '3.6.17', templateHash: 'h', createdAt: 0, phase: 'Provisioning', phaseTimes: {} };
const lastBackupAttempt = { at: 5, ok: false, message: 'EACCES' };
const cp = { name: 'k', nextOrdinal: 2, lastBackupAttempt, manifest: { spec: { kubernetes: { version: '1.36.3' } } } } as unknown as ControlPlaneRecord;

interface Seen {
  order: string[];
  warnings: string[];
}

/** One machine still provisioning (so etcd is not asked), whose describe answers a turn of the event loop later. */
async function observeWith(routes: ControlPlaneEndpoint['routes'], careObserve: CarePort['observe']): Promise<{ observed: Awaited<ReturnType<typeof observe>>; seen: Seen }> {
  const seen: Seen = { order: [], warnings: [] };
  const endpoint: ControlPlaneEndpoint = {
    address: ENDPOINT,
    routes: () => {
      seen.order.push('routes');
      return routes();
    },
  } as ControlPlaneEndpoint;
  const kubernetes = { endpoint: () => Promise.resolve(endpoint) } as unknown as KubernetesMachines;
  const provider = {
    kubernetes,
    describe: async (_cluster: string, name: string) => {
      seen.order.push('describe');
      await setImmediate();
      seen.order.push('described');
      return { name, address: '127.0.0.1', clientURL: 'https://127.0.0.1:2379', peerURL: 'https://127.0.0.1:2380', state: 'Provisioning' as const, memberRunning: false };
    },
  } as unknown as InfraProvider;
  const care = {
    observe: () => {
      seen.order.push('care');
      return careObserve();
    },
  } as CarePort;
  const store = { getControlPlane: () => Promise.resolve(cp), listMachines: () => Promise.resolve([machine]) } as unknown as StateStore;
  const etcd = { memberList: () => Promise.reject(new Error('no member runs: etcd is not asked')) } as unknown as EtcdAdmin;
  const log: Logger = {
    debug: () => undefined,
    info: () => undefined,
    warn: (_fields, message) => {
      seen.warnings.push(message);
    },
  };
  const observed = await observe({ cluster: 'k', etcd, provider, store, care, log });
  return { observed, seen };
}

test("the provider's machines, the endpoint's routes and care are read together, each once", async () => {
  const { observed, seen } = await observeWith(
    () => Promise.resolve([{ machine: 'k-1', up: true }]),
    () => Promise.resolve({ backups: { count: 2 } }),
  );
  assert.deepEqual(seen.order, ['describe', 'routes', 'care', 'described'], 'routes and care are asked while describe is still out');
  assert.deepEqual(observed.endpoint, { address: ENDPOINT, routes: [{ machine: 'k-1', up: true }] });
  assert.deepEqual(observed.care, { backups: { count: 2, lastAttempt: lastBackupAttempt } });
  assert.deepEqual(seen.warnings, []);
});

test('a failed routes or care read is logged and kept as data, and the snapshot is still whole', async () => {
  const { observed, seen } = await observeWith(
    () => Promise.reject(new Error('stat socket gone')),
    () => Promise.reject(new Error('backups folder unreadable')),
  );
  assert.deepEqual(observed.endpoint, { address: ENDPOINT }, 'routes unread: the endpoint reads as not running, so the next pass routes again');
  assert.deepEqual(observed.care, { backups: { count: 0, lastAttempt: lastBackupAttempt } }, "care keeps what the records say; the failed read's part is left out");
  assert.equal(observed.machines.length, 1);
  assert.deepEqual(seen.warnings.sort(), [
    'observe: backups and certificates failed at : backups folder unreadable',
    `observe: endpoint routes failed at ${ENDPOINT}: stat socket gone`,
  ]);
});

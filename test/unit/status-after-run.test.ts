import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import type { ClusterPorts } from '../../src/app/runtime.ts';
import { statusAfter } from '../../src/app/status.ts';
import type { CareService } from '../../src/care/care-service.ts';
import type { Decision, Observed } from '../../src/planner/types.ts';
import type { EtcdAdmin } from '../../src/ports/etcd-admin.ts';
import type { MachineProvider } from '../../src/ports/machine-provider.ts';
import type { Convergence } from '../../src/reconciler/converge.ts';
import { manifest, T0 } from '../support/state-store-records.ts';

// The status `up` prints after its run: on the last pass's look when that pass acted on nothing (so
// nothing changed since it looked), else on a fresh look, as `status` reads it.

const lastObserved: Observed = { nextOrdinal: 1, machines: [], members: { ok: true, list: [] }, alarms: [] };
const settled: Decision = { machineActions: [], waits: [{ code: 'LastPass', message: 'seen by the last pass' }], conditions: [], requeueAfterMs: 5_000, converged: true, phases: {} };

async function portsCountingLooks(): Promise<{ ports: ClusterPorts; looks: () => number }> {
  const store = new MemoryStateStore();
  await store.applySpec(manifest('s', 1), T0);
  let looks = 0;
  const care = {
    observe: () => {
      looks++;
      return Promise.resolve({});
    },
  } as unknown as CareService;
  const provider = { clientTls: () => undefined, describe: () => Promise.resolve(undefined) } as unknown as MachineProvider;
  const etcd = {} as EtcdAdmin;
  const log = { debug: () => undefined, info: () => undefined, warn: () => undefined };
  return { ports: { cluster: 's', store, provider, etcd, care, log }, looks: () => looks };
}

const run = (lastPass?: Convergence['lastPass']): Convergence => ({ outcome: 'Converged', generation: 1, passes: 1, settledAt: T0, ...(lastPass === undefined ? {} : { lastPass }) });

describe('the status after a run', () => {
  test("a last pass that acted on nothing is the status's look: nothing is read from the cluster again", async () => {
    const { ports, looks } = await portsCountingLooks();
    const doc = await statusAfter(ports, run({ observed: lastObserved, decision: settled }));
    assert.equal(looks(), 0);
    assert.equal(doc.status.phase, 'Ready');
    assert.deepEqual(doc.status.waits, [{ code: 'LastPass', message: 'seen by the last pass' }]);
    assert.equal(doc.metadata.generation, 1, 'the records are read as they are now');
  });

  test('a last pass that acted is looked at anew: its look is from before its actions', async () => {
    const { ports, looks } = await portsCountingLooks();
    const acted: Decision = { ...settled, converged: false, machineActions: [{ kind: 'CreateMachine', machine: 's-1', reason: 'ScaleUp' }] as Decision['machineActions'] };
    const doc = await statusAfter(ports, run({ observed: lastObserved, decision: acted }));
    assert.equal(looks(), 1);
    assert.ok(!doc.status.waits.some((w) => w.code === 'LastPass'), 'the waits are a fresh plan of the cluster as it is now');
    assert.notEqual(doc.status.phase, 'Ready', 'a control plane with no machine is not ready');
  });

  test('a run that followed another process has no look of its own: the status looks anew', async () => {
    const { ports, looks } = await portsCountingLooks();
    await statusAfter(ports, run());
    assert.equal(looks(), 1);
  });
});

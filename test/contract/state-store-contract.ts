import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, test } from 'node:test';
import { defaultControlPlane } from '../../src/api/control-plane.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../src/domain/machine.ts';
import type { StateStore } from '../../src/ports/state-store.ts';

function controlPlane(name: string, createdAt = 1_000): ControlPlaneRecord {
  return { name, manifest: defaultControlPlane(name), createdAt, clusterToken: `${name}-token`, nextOrdinal: 1 };
}

function fullControlPlane(name: string): ControlPlaneRecord {
  return {
    ...controlPlane(name),
    nextOrdinal: 4,
    initMachine: `${name}-1`,
    initializedAt: 1_500,
    lastRemediation: { machine: `${name}-2`, at: 2_000, retryCount: 1 },
  };
}

function machine(cluster: string, ordinal: number): MachineRecord {
  return {
    cluster,
    name: `${cluster}-${ordinal}`,
    ordinal,
    version: '3.4.23',
    templateHash: 'h1',
    createdAt: 1_000 + ordinal,
    phase: 'Pending',
    phaseTimes: { Pending: 1_000 + ordinal },
  };
}

function fullMachine(cluster: string, ordinal: number): MachineRecord {
  return {
    ...machine(cluster, ordinal),
    failureDomain: 'zone-a',
    phase: 'Failed',
    phaseTimes: { Pending: 1_000, Provisioning: 1_010, Provisioned: 1_020, Joining: 1_030, Learner: 1_040, Failed: 1_050 },
    role: 'join',
    memberId: '8e9e05c52164694d',
    address: '127.0.0.1',
    clientURL: 'http://127.0.0.1:2379',
    peerURL: 'http://127.0.0.1:2380',
    failed: { reason: 'LearnerStuck', message: 'applied index did not move', at: 1_050 },
    deleteRequested: { reason: 'Remediation', at: 1_060 },
    unhealthySince: 1_045,
    learnerProgress: { appliedIndex: 17, at: 1_044 },
  };
}

function event(cluster: string, at: number, reason = 'Scaled'): EventRecord {
  return { cluster, at, type: 'Normal', reason, message: `${reason} at ${at}` };
}

function fullEvent(cluster: string, at: number): EventRecord {
  return {
    ...event(cluster, at, 'MemberAdded'),
    type: 'Warning',
    machine: `${cluster}-2`,
    action: 'AddLearner',
    endedAt: at + 5,
    outcome: 'Failed',
  };
}

/** What is stored for the given clusters, to compare a store before and after an operation. */
function snapshot(store: StateStore, clusters: readonly string[]) {
  return {
    controlPlanes: store.listControlPlanes().filter((cp) => clusters.includes(cp.name)),
    machines: clusters.map((cluster) => store.listMachines(cluster)),
    events: clusters.map((cluster) => store.listEvents(cluster)),
  };
}

/** A PID that no process has: a child that already exited and was reaped. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  assert.ok(child.pid > 0, 'could not spawn a short-lived child');
  return child.pid;
}

/** Registers the cases every StateStore implementation must pass; each case gets a fresh store. */
export function defineStateStoreContract(label: string, make: () => { store: StateStore; cleanup(): void }): void {
  const withStore = (body: (store: StateStore) => void) => () => {
    const fixture = make();
    try {
      body(fixture.store);
    } finally {
      fixture.cleanup();
    }
  };

  describe(`StateStore contract: ${label}`, () => {
    test(
      'control plane records round-trip with optional fields absent or present',
      withStore((store) => {
        const minimal = controlPlane('alpha');
        const full = fullControlPlane('beta');
        store.putControlPlane(minimal);
        store.putControlPlane(full);
        assert.deepEqual(store.getControlPlane('alpha'), minimal);
        assert.deepEqual(store.getControlPlane('beta'), full);
        assert.equal(store.getControlPlane('gamma'), undefined);
      }),
    );

    test(
      'putControlPlane replaces; listControlPlanes orders by creation time, then name',
      withStore((store) => {
        store.putControlPlane(controlPlane('zeta', 1_000));
        store.putControlPlane(controlPlane('beta', 2_000));
        store.putControlPlane(controlPlane('alpha', 2_000));
        const updated = { ...controlPlane('zeta', 1_000), nextOrdinal: 7 };
        store.putControlPlane(updated);
        assert.deepEqual(store.listControlPlanes(), [updated, controlPlane('alpha', 2_000), controlPlane('beta', 2_000)]);
      }),
    );

    test(
      'machine records round-trip with optional fields absent or present',
      withStore((store) => {
        const minimal = machine('alpha', 1);
        const full = fullMachine('alpha', 2);
        store.putMachine(minimal);
        store.putMachine(full);
        assert.deepEqual(store.getMachine('alpha', 'alpha-1'), minimal);
        assert.deepEqual(store.getMachine('alpha', 'alpha-2'), full);
        assert.equal(store.getMachine('alpha', 'alpha-3'), undefined);
        assert.equal(store.getMachine('beta', 'alpha-1'), undefined);
      }),
    );

    test(
      'listMachines filters by cluster and orders by ordinal; putMachine replaces; deleteMachine removes',
      withStore((store) => {
        for (const ordinal of [3, 1, 2]) store.putMachine(machine('alpha', ordinal));
        store.putMachine(machine('beta', 0));
        const joined: MachineRecord = { ...machine('alpha', 2), phase: 'Voter', phaseTimes: { Pending: 1_002, Voter: 1_100 } };
        store.putMachine(joined);
        assert.deepEqual(store.listMachines('alpha'), [machine('alpha', 1), joined, machine('alpha', 3)]);
        assert.deepEqual(store.listMachines('beta'), [machine('beta', 0)]);
        assert.deepEqual(store.listMachines('gamma'), []);

        store.deleteMachine('alpha', 'alpha-1');
        store.deleteMachine('alpha', 'alpha-9');
        assert.deepEqual(
          store.listMachines('alpha').map((m) => m.name),
          ['alpha-2', 'alpha-3'],
        );
        assert.equal(store.getMachine('alpha', 'alpha-1'), undefined);
      }),
    );

    test(
      'events round-trip, filter by cluster and keep insertion order (not time order)',
      withStore((store) => {
        const appended = [event('alpha', 300), fullEvent('alpha', 100), event('alpha', 200), event('alpha', 200, 'Again')];
        store.appendEvent(event('beta', 150));
        for (const e of appended) store.appendEvent(e);
        store.appendEvent(event('beta', 50));
        assert.deepEqual(store.listEvents('alpha'), appended);
        assert.deepEqual(store.listEvents('beta'), [event('beta', 150), event('beta', 50)]);
        assert.deepEqual(store.listEvents('gamma'), []);
      }),
    );

    test(
      'deleteControlPlane removes its machines, events and lease, and nothing of other clusters',
      withStore((store) => {
        for (const cluster of ['alpha', 'beta']) {
          store.putControlPlane(controlPlane(cluster));
          store.putMachine(machine(cluster, 1));
          store.appendEvent(event(cluster, 100));
          assert.equal(store.acquireLease(cluster, { pid: process.pid, token: `${cluster}-holder` }), true);
        }
        const beta = snapshot(store, ['beta']);

        store.deleteControlPlane('alpha');

        assert.equal(store.getControlPlane('alpha'), undefined);
        assert.deepEqual(store.listMachines('alpha'), []);
        assert.deepEqual(store.listEvents('alpha'), []);
        assert.equal(store.acquireLease('alpha', { pid: process.pid, token: 'newcomer' }), true, 'the lease went too');
        assert.deepEqual(snapshot(store, ['beta']), beta);
        assert.equal(store.acquireLease('beta', { pid: process.pid, token: 'newcomer' }), false, "beta's lease stays");
      }),
    );

    test(
      'transaction commits and returns what fn returns',
      withStore((store) => {
        const result = store.transaction(() => {
          store.putControlPlane(controlPlane('alpha'));
          store.putMachine(machine('alpha', 1));
          return 42;
        });
        assert.equal(result, 42);
        assert.deepEqual(store.getControlPlane('alpha'), controlPlane('alpha'));
        assert.deepEqual(store.listMachines('alpha'), [machine('alpha', 1)]);
      }),
    );

    test(
      'transaction rolls back every write when fn throws',
      withStore((store) => {
        store.putControlPlane(controlPlane('alpha'));
        store.putMachine(machine('alpha', 1));
        store.appendEvent(event('alpha', 100));
        store.putControlPlane(controlPlane('beta'));
        store.putMachine(machine('beta', 1));
        const before = snapshot(store, ['alpha', 'beta', 'gamma']);
        const boom = new Error('boom');

        assert.throws(
          () =>
            store.transaction(() => {
              store.putControlPlane({ ...controlPlane('alpha'), nextOrdinal: 9 });
              store.putControlPlane(controlPlane('gamma'));
              store.putMachine(machine('alpha', 2));
              store.putMachine({ ...machine('alpha', 1), phase: 'Deleting' });
              store.deleteMachine('alpha', 'alpha-1');
              store.appendEvent(event('alpha', 200));
              store.appendEvent(event('gamma', 200));
              store.deleteControlPlane('beta');
              assert.equal(store.acquireLease('alpha', { pid: process.pid, token: 'inside' }), true);
              throw boom;
            }),
          (error) => error === boom,
        );

        assert.deepEqual(snapshot(store, ['alpha', 'beta', 'gamma']), before);
        assert.equal(store.acquireLease('alpha', { pid: process.pid, token: 'after' }), true, 'the lease was rolled back');
      }),
    );

    test(
      'a nested transaction that throws undoes only its own writes',
      withStore((store) => {
        store.transaction(() => {
          store.putMachine(machine('alpha', 1));
          assert.throws(() =>
            store.transaction(() => {
              store.putMachine(machine('alpha', 2));
              throw new Error('inner');
            }),
          );
          store.putMachine(machine('alpha', 3));
        });
        assert.deepEqual(store.listMachines('alpha'), [machine('alpha', 1), machine('alpha', 3)]);
      }),
    );

    test(
      'transaction refuses a function that returns a promise and keeps none of its writes',
      withStore((store) => {
        assert.throws(
          () =>
            store.transaction(() => {
              store.putControlPlane(controlPlane('alpha'));
              return Promise.resolve(1);
            }),
          TypeError,
        );
        assert.equal(store.getControlPlane('alpha'), undefined);
      }),
    );

    test(
      'lease: a live holder keeps it, the same token re-acquires, a wrong-token release is ignored',
      withStore((store) => {
        const first = { pid: process.pid, token: 'first' };
        assert.equal(store.acquireLease('alpha', first), true);
        assert.equal(store.acquireLease('alpha', { pid: process.pid, token: 'second' }), false);
        assert.equal(store.acquireLease('alpha', first), true, 'same token re-acquires');
        assert.equal(store.acquireLease('beta', { pid: process.pid, token: 'second' }), true, 'leases are per cluster');

        store.releaseLease('alpha', 'second');
        assert.equal(store.acquireLease('alpha', { pid: process.pid, token: 'third' }), false, 'wrong token released nothing');

        store.releaseLease('alpha', 'first');
        assert.equal(store.acquireLease('alpha', { pid: process.pid, token: 'third' }), true);
      }),
    );

    test(
      'lease: a holder whose process is gone is taken over',
      withStore((store) => {
        assert.equal(store.acquireLease('alpha', { pid: deadPid(), token: 'gone' }), true);
        assert.equal(store.acquireLease('alpha', { pid: process.pid, token: 'successor' }), true);
        assert.equal(store.acquireLease('alpha', { pid: process.pid, token: 'gone' }), false, 'the old token lost it');
      }),
    );

    test(
      'records are copied: neither the stored input nor a returned object is shared with the caller',
      withStore((store) => {
        const cp = controlPlane('alpha');
        const m = fullMachine('alpha', 1);
        const e = fullEvent('alpha', 100);
        store.putControlPlane(cp);
        store.putMachine(m);
        store.appendEvent(e);

        cp.manifest.spec.replicas = 9;
        m.phaseTimes.Voter = 5;
        e.message = 'changed after append';
        const gotCp = store.getControlPlane('alpha')!;
        gotCp.manifest.spec.replicas = 7;
        store.listControlPlanes()[0]!.nextOrdinal = 99;
        const gotMachine = store.getMachine('alpha', 'alpha-1')!;
        gotMachine.failed!.reason = 'mutated';
        store.listMachines('alpha')[0]!.phaseTimes.Voter = 6;
        store.listEvents('alpha')[0]!.message = 'mutated';

        assert.deepEqual(store.getControlPlane('alpha'), controlPlane('alpha'));
        assert.deepEqual(store.listMachines('alpha'), [fullMachine('alpha', 1)]);
        assert.deepEqual(store.listEvents('alpha'), [fullEvent('alpha', 100)]);
      }),
    );
  });
}

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { EventRecord, MachineRecord } from '../../src/domain/machine.ts';
import { DocumentConflictError, FencedOutError, StoreRefusedError, type StateStore, type WriterLease } from '../../src/ports/state-store.ts';
import { holder, leased, manifest, T0 } from '../support/state-store-records.ts';
import { defineLeaseCases, type WithStore } from './state-store-lease-cases.ts';

function machine(cluster: string, ordinal: number): MachineRecord {
  return {
    cluster,
    name: `${cluster}-${String(ordinal)}`,
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
    memberId: '10276657743932975437',
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
  return { cluster, at, type: 'Normal', reason, message: `${reason} at ${String(at)}` };
}


/** What is stored for a cluster, to compare before and after an operation. */
async function snapshot(store: StateStore, cluster: string) {
  return { cp: await store.getControlPlane(cluster), machines: await store.listMachines(cluster), events: await store.listEvents(cluster) };
}

/**
 * Collects a spec watch's calls and waits for a given cluster to be reported: within a second, as the
 * port promises (a watch that never reports fails the case instead of hanging it).
 */
function recorder() {
  const seen: string[] = [];
  const waiting: { cluster: string; resolve: () => void }[] = [];
  return {
    seen,
    onChange: (cluster: string) => {
      seen.push(cluster);
      for (const w of waiting.filter((item) => item.cluster === cluster)) w.resolve();
    },
    /** Resolves once `cluster` is reported after the call (earlier reports do not count). */
    next: (cluster: string): Promise<void> =>
      new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new Error(`the watch did not report ${cluster} within 1 s (saw: ${seen.join(', ') || 'nothing'})`));
        }, 1_000);
        waiting.push({ cluster, resolve: () => { clearTimeout(timer); resolve(); } });
      }),
  };
}

export interface StateStoreFixture {
  store: StateStore;
  /** Another connection to the same records, as a second process would open (default: the same store). */
  connect?(): StateStore;
  cleanup(): void | Promise<void>;
}

/** Registers the cases every StateStore implementation must pass; each case gets a fresh store. */
export function defineStateStoreContract(label: string, make: () => StateStoreFixture | Promise<StateStoreFixture>): void {
  const withStore: WithStore = (body) => async () => {
    const fixture = await make();
    const other = fixture.connect?.() ?? fixture.store;
    try {
      await body(fixture.store, other);
    } finally {
      if (other !== fixture.store) await other.close();
      await fixture.cleanup();
    }
  };

  describe(`StateStore contract: ${label}`, () => {
    test(
      'applySpec creates generation 1, bumps the generation only when the spec changes, and keeps the rest',
      withStore(async (store) => {
        const created = await store.applySpec(manifest('alpha', 3), T0);
        assert.equal(created.created, true);
        assert.equal(created.record.generation, 1);
        assert.equal(created.record.nextOrdinal, 1);
        const same = await store.applySpec(manifest('alpha', 3), T0 + 1);
        assert.deepEqual([same.created, same.changed, same.record.generation], [false, false, 1]);
        const lease = await leased(store, 'alpha');
        await store.commit(lease, [{ kind: 'PatchControlPlane', patch: { initMachine: 'alpha-1', nextOrdinal: 4, observedGeneration: 1 } }]);
        const scaled = await store.applySpec(manifest('alpha', 5), T0 + 2);
        assert.deepEqual([scaled.changed, scaled.record.generation], [true, 2]);
        const stored = await store.getControlPlane('alpha');
        assert.equal(stored?.manifest.spec.replicas, 5);
        assert.equal(stored.initMachine, 'alpha-1', 'a new spec keeps what the reconciler recorded');
        assert.equal(stored.nextOrdinal, 4);
        assert.equal(stored.createdAt, T0);
      }),
    );

    test(
      'machine records round-trip, are patched field by field, and listed in ordinal order',
      withStore(async (store) => {
        const lease = await leased(store, 'alpha');
        await store.commit(lease, [
          { kind: 'CreateMachine', record: fullMachine('alpha', 2) },
          { kind: 'CreateMachine', record: machine('alpha', 1) },
        ]);
        assert.deepEqual(await store.getMachine('alpha', 'alpha-2'), fullMachine('alpha', 2));
        assert.deepEqual((await store.listMachines('alpha')).map((m) => m.name), ['alpha-1', 'alpha-2']);
        // Two patches of different fields, as two actions of one pass write them: both survive.
        await store.commit(lease, [{ kind: 'PatchMachine', name: 'alpha-1', set: { memberId: '42' } }]);
        await store.commit(lease, [{ kind: 'PatchMachine', name: 'alpha-1', set: { phase: 'Voter' }, unset: ['failureDomain'] }]);
        await store.commit(lease, [{ kind: 'PatchMachine', name: 'alpha-2', set: {}, unset: ['failed', 'deleteRequested'] }]);
        const one = await store.getMachine('alpha', 'alpha-1');
        assert.deepEqual([one?.memberId, one?.phase], ['42', 'Voter']);
        const two = await store.getMachine('alpha', 'alpha-2');
        assert.equal(two?.failed, undefined);
        assert.equal(two?.deleteRequested, undefined);
        assert.equal(two?.memberId, fullMachine('alpha', 2).memberId);
        // CreateMachine of an existing name is an idempotent retry: the record stays as it is.
        await store.commit(lease, [{ kind: 'CreateMachine', record: { ...machine('alpha', 1), phase: 'Pending' } }]);
        assert.equal((await store.getMachine('alpha', 'alpha-1'))?.phase, 'Voter');
        await store.commit(lease, [{ kind: 'DeleteMachine', name: 'alpha-1' }]);
        assert.equal(await store.getMachine('alpha', 'alpha-1'), undefined);
      }),
    );

    test(
      'a writer that does not hold the lease writes nothing (fencing)',
      withStore(async (store) => {
        const lease = await leased(store, 'alpha');
        await store.commit(lease, [{ kind: 'CreateMachine', record: machine('alpha', 1) }]);
        const before = await snapshot(store, 'alpha');
        const stale: WriterLease = { cluster: 'alpha', token: 'someone-else' };
        for (const write of [
          { kind: 'CreateMachine', record: machine('alpha', 2) },
          { kind: 'PatchMachine', name: 'alpha-1', set: { phase: 'Voter' } },
          { kind: 'DeleteMachine', name: 'alpha-1' },
          { kind: 'PatchControlPlane', patch: { initMachine: 'alpha-1' } },
          { kind: 'ReserveOrdinal', ordinal: 7 },
          { kind: 'AppendEvent', event: event('alpha', 5) },
        ] as const) {
          await assert.rejects(store.commit(stale, [write]), FencedOutError, `${write.kind} went through without the lease`);
        }
        await assert.rejects(store.deleteControlPlane(stale), FencedOutError);
        assert.deepEqual(await snapshot(store, 'alpha'), before);
        // Once another writer takes the lease over (expired, or as here by force), the old one is fenced out too.
        assert.equal(await store.acquireLease('alpha', holder('successor'), T0 + 1, { force: true }), true, 'the lease is taken over');
        await assert.rejects(store.commit(lease, [{ kind: 'AppendEvent', event: event('alpha', 6) }]), FencedOutError);
        assert.deepEqual(await snapshot(store, 'alpha'), before);
      }),
    );

    test(
      'the store refuses to change initMachine once set or to lower nextOrdinal, and a refused batch writes nothing',
      withStore(async (store) => {
        const lease = await leased(store, 'alpha');
        await store.commit(lease, [{ kind: 'PatchControlPlane', patch: { initMachine: 'alpha-1', nextOrdinal: 5 } }]);
        const before = await snapshot(store, 'alpha');
        await assert.rejects(
          store.commit(lease, [{ kind: 'AppendEvent', event: event('alpha', 1) }, { kind: 'PatchControlPlane', patch: { initMachine: 'alpha-2' } }]),
          StoreRefusedError,
        );
        await assert.rejects(
          store.commit(lease, [{ kind: 'CreateMachine', record: machine('alpha', 9) }, { kind: 'PatchControlPlane', patch: { nextOrdinal: 3 } }]),
          StoreRefusedError,
        );
        assert.deepEqual(await snapshot(store, 'alpha'), before, 'no write of a refused batch landed');
        await store.commit(lease, [{ kind: 'PatchControlPlane', patch: { initMachine: 'alpha-1' } }]);
        // Concurrent creations reserve ordinals in any order; nextOrdinal only grows.
        await store.commit(lease, [{ kind: 'ReserveOrdinal', ordinal: 8 }]);
        await store.commit(lease, [{ kind: 'ReserveOrdinal', ordinal: 6 }]);
        assert.equal((await store.getControlPlane('alpha'))?.nextOrdinal, 9);
      }),
    );

    test(
      'AbandonInit clears initMachine only while it names that machine, lists it, and that machine never becomes init again',
      withStore(async (store) => {
        const lease = await leased(store, 'alpha');
        await store.commit(lease, [{ kind: 'PatchControlPlane', patch: { initMachine: 'alpha-1' } }]);
        await store.commit(lease, [{ kind: 'AbandonInit', machine: 'alpha-2' }]);
        assert.equal((await store.getControlPlane('alpha'))?.initMachine, 'alpha-1', 'another machine named: nothing changes');
        await store.commit(lease, [{ kind: 'AbandonInit', machine: 'alpha-1' }]);
        let cp = await store.getControlPlane('alpha');
        assert.equal(cp?.initMachine, undefined);
        assert.deepEqual(cp?.abandonedInits, ['alpha-1']);
        await assert.rejects(store.commit(lease, [{ kind: 'PatchControlPlane', patch: { initMachine: 'alpha-1' } }]), StoreRefusedError);
        await store.commit(lease, [{ kind: 'PatchControlPlane', patch: { initMachine: 'alpha-2' } }]);
        // A retried abandon of the first init, after the second was recorded, keeps the second.
        await store.commit(lease, [{ kind: 'AbandonInit', machine: 'alpha-1' }]);
        cp = await store.getControlPlane('alpha');
        assert.ok(cp);
        assert.equal(cp.initMachine, 'alpha-2');
        assert.deepEqual(cp.abandonedInits, ['alpha-1']);
        await assert.rejects(store.commit(lease, [{ kind: 'PatchControlPlane', patch: { initMachine: 'alpha-3' } }]), StoreRefusedError);
      }),
    );

    test(
      'events keep their order, carry a sequence number, and can be read after a given one',
      withStore(async (store) => {
        const lease = await leased(store, 'alpha');
        const other = await leased(store, 'beta');
        await store.commit(lease, [{ kind: 'AppendEvent', event: event('alpha', 30, 'A') }, { kind: 'AppendEvent', event: event('alpha', 10, 'B') }]);
        await store.commit(other, [{ kind: 'AppendEvent', event: event('beta', 20, 'X') }]);
        await store.commit(lease, [{ kind: 'AppendEvent', event: { ...event('alpha', 40, 'C'), action: 'AddLearner', outcome: 'Refused', endedAt: 45, machine: 'alpha-2' } }]);
        const all = await store.listEvents('alpha');
        assert.deepEqual(all.map((e) => e.reason), ['A', 'B', 'C'], 'append order, not time order');
        assert.deepEqual(all[2] && { ...all[2], seq: undefined }, { ...event('alpha', 40, 'C'), action: 'AddLearner', outcome: 'Refused', endedAt: 45, machine: 'alpha-2', seq: undefined });
        const seqs = all.map((e) => e.seq ?? 0);
        assert.ok(seqs[0]! < seqs[1]! && seqs[1]! < seqs[2]!, `increasing sequence numbers: ${seqs.join(',')}`);
        assert.deepEqual((await store.listEvents('alpha', seqs[0])).map((e) => e.reason), ['B', 'C']);
        assert.deepEqual((await store.listEvents('beta')).map((e) => e.reason), ['X']);
      }),
    );

    defineLeaseCases(withStore);


    test(
      'deleteControlPlane removes the record, its machines, events and lease, and nothing of other clusters',
      withStore(async (store) => {
        const alpha = await leased(store, 'alpha');
        const beta = await leased(store, 'beta');
        await store.commit(alpha, [{ kind: 'CreateMachine', record: machine('alpha', 1) }, { kind: 'AppendEvent', event: event('alpha', 1) }]);
        await store.commit(beta, [{ kind: 'CreateMachine', record: machine('beta', 1) }, { kind: 'AppendEvent', event: event('beta', 1) }]);
        const betaBefore = await snapshot(store, 'beta');
        await store.deleteControlPlane(alpha);
        assert.deepEqual(await snapshot(store, 'alpha'), { cp: undefined, machines: [], events: [] });
        assert.equal(await store.getLease('alpha'), undefined);
        assert.deepEqual(await snapshot(store, 'beta'), betaBefore);
        assert.deepEqual((await store.listControlPlanes()).map((cp) => cp.name), ['beta']);
        assert.equal((await store.getLease('beta'))?.token, beta.token);
      }),
    );

    test(
      'records are copied: neither a stored input nor a returned object is shared with the caller',
      withStore(async (store) => {
        const lease = await leased(store, 'alpha');
        const m = fullMachine('alpha', 1);
        const e = event('alpha', 100);
        await store.commit(lease, [{ kind: 'CreateMachine', record: m }, { kind: 'AppendEvent', event: e }]);
        m.phaseTimes.Voter = 5;
        e.message = 'changed after append';
        const got = await store.getControlPlane('alpha');
        if (got) got.manifest.spec.replicas = 7;
        const gotMachine = await store.getMachine('alpha', 'alpha-1');
        if (gotMachine?.failed) gotMachine.failed.reason = 'mutated';
        assert.equal((await store.getControlPlane('alpha'))?.manifest.spec.replicas, 3);
        assert.deepEqual(await store.listMachines('alpha'), [fullMachine('alpha', 1)]);
        assert.equal((await store.listEvents('alpha'))[0]?.message, 'Scaled at 100');
      }),
    );

    test(
      'watchSpecs reports existing clusters, then every new generation and deletion stored by another connection',
      withStore(async (store, other) => {
        await store.applySpec(manifest('alpha'), T0);
        const calls = recorder();
        const initial = calls.next('alpha');
        const watch = store.watchSpecs(calls.onChange);
        try {
          await initial;
          const created = calls.next('beta');
          await other.applySpec(manifest('beta'), T0 + 1);
          await created;
          const scaled = calls.next('alpha');
          await other.applySpec(manifest('alpha', 5), T0 + 2);
          await scaled;
          const deleted = calls.next('beta');
          assert.equal(await other.acquireLease('beta', holder('deleter'), T0 + 3), true);
          await other.deleteControlPlane({ cluster: 'beta', token: 'deleter' });
          await deleted;
        } finally {
          await watch.close();
        }
        const before = calls.seen.length;
        await other.applySpec(manifest('gamma'), T0 + 4);
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal(calls.seen.length, before, `no call after close (saw ${calls.seen.slice(before).join(', ')})`);
      }),
    );

    test(
      'claims are exclusive across connections, idempotent for their owner, per pool, and released only by it',
      withStore(async (store, other) => {
        assert.equal(await store.claim('slots', 'k1', 'one'), true);
        assert.equal(await other.claim('slots', 'k1', 'two'), false, 'another owner is refused');
        assert.equal(await store.claim('slots', 'k1', 'one'), true, 'the owner claiming again still holds it');
        assert.equal(await other.claim('other-pool', 'k1', 'two'), true, 'pools are separate');
        assert.deepEqual(await other.listClaims('slots'), [{ pool: 'slots', key: 'k1', owner: 'one' }]);
        await other.releaseClaim('slots', 'k1', 'two');
        assert.deepEqual(await store.listClaims('slots'), [{ pool: 'slots', key: 'k1', owner: 'one' }], 'a non-owner releases nothing');
        await store.releaseClaim('slots', 'k1', 'one');
        assert.deepEqual(await other.listClaims('slots'), []);
        // Racing claims of one key from both connections: exactly one owner wins.
        const owners = ['a', 'b', 'c', 'd', 'e', 'f'];
        const won = await Promise.all(owners.map((owner, i) => (i % 2 === 0 ? store : other).claim('slots', 'k2', owner)));
        assert.equal(won.filter(Boolean).length, 1, `one winner: ${won.join(',')}`);
        const winner = owners[won.indexOf(true)];
        assert.deepEqual(await store.listClaims('slots'), [{ pool: 'slots', key: 'k2', owner: winner }]);
        assert.deepEqual((await other.listClaims('other-pool')).map((c) => c.owner), ['two']);
      }),
    );

    test(
      'documents are shared by every connection, per scope and by key',
      withStore(async (store, other) => {
        assert.equal(await other.getDocument('ssh/alpha', 'machine/m1'), undefined);
        await store.putDocument('ssh/alpha', 'machine/m1', '{"state":"Provisioning"}');
        await store.putDocument('ssh/alpha', 'file/pki/ca.crt', 'PEM with / and spaces');
        await store.putDocument('ssh/beta', 'machine/m1', '{"state":"Provisioned"}');
        assert.equal(await other.getDocument('ssh/alpha', 'machine/m1'), '{"state":"Provisioning"}', 'another connection reads what one wrote');
        await other.putDocument('ssh/alpha', 'machine/m1', '{"state":"Provisioned"}');
        assert.equal(await store.getDocument('ssh/alpha', 'machine/m1'), '{"state":"Provisioned"}', 'a put replaces');
        assert.deepEqual(await other.listDocuments('ssh/alpha'), [
          { key: 'file/pki/ca.crt', value: 'PEM with / and spaces' },
          { key: 'machine/m1', value: '{"state":"Provisioned"}' },
        ]);
        await other.deleteDocument('ssh/alpha', 'machine/m1');
        assert.deepEqual((await store.listDocuments('ssh/alpha')).map((d) => d.key), ['file/pki/ca.crt']);
        assert.deepEqual(await store.listDocuments('ssh/beta'), [{ key: 'machine/m1', value: '{"state":"Provisioned"}' }], 'scopes are separate');
        assert.deepEqual(await store.listDocuments('ssh/alph'), [], 'a scope is not a prefix of another');
      }),
    );

    test(
      'putDocuments stores its puts and removes its deletes as one write, in its own scope only',
      withStore(async (store, other) => {
        await store.putDocuments('ssh/alpha', [{ key: 'file/a', value: 'A1' }, { key: 'file/b', value: 'B1' }], []);
        await store.putDocument('ssh/beta', 'file/a', 'other scope');
        await other.putDocuments('ssh/alpha', [{ key: 'file/a', value: 'A2' }, { key: 'generation', value: '2' }], ['file/b', 'file/never-stored']);
        assert.deepEqual(await store.listDocuments('ssh/alpha'), [
          { key: 'file/a', value: 'A2' },
          { key: 'generation', value: '2' },
        ]);
        assert.deepEqual(await store.listDocuments('ssh/beta'), [{ key: 'file/a', value: 'other scope' }]);
        await store.putDocuments('ssh/alpha', [], ['file/a', 'generation']);
        assert.deepEqual(await other.listDocuments('ssh/alpha'), []);
      }),
    );

    test(
      'a conditional putDocuments writes only while its document holds the value it was read with: else nothing, DocumentConflictError',
      withStore(async (store, other) => {
        await store.putDocuments('ssh/alpha', [{ key: 'file/a', value: 'A1' }, { key: 'files', value: 'generation 1' }], [], { key: 'files', value: undefined });
        await assert.rejects(other.putDocuments('ssh/alpha', [{ key: 'file/z', value: 'Z1' }, { key: 'files', value: 'another generation 1' }], [], { key: 'files', value: undefined }), DocumentConflictError, 'a first generation exists already');
        // Two writers read generation 1; the first to write stores generation 2, the other's whole batch is refused.
        await other.putDocuments('ssh/alpha', [{ key: 'file/b', value: 'B2' }, { key: 'files', value: 'generation 2' }], ['file/a'], { key: 'files', value: 'generation 1' });
        await assert.rejects(store.putDocuments('ssh/alpha', [{ key: 'file/c', value: 'C2' }, { key: 'files', value: 'generation 2 too' }], ['file/b'], { key: 'files', value: 'generation 1' }), DocumentConflictError);
        assert.deepEqual(await store.listDocuments('ssh/alpha'), [
          { key: 'file/b', value: 'B2' },
          { key: 'files', value: 'generation 2' },
        ]);
        await store.putDocuments('ssh/alpha', [{ key: 'file/c', value: 'C3' }, { key: 'files', value: 'generation 3' }], [], { key: 'files', value: 'generation 2' });
        assert.equal(await other.getDocument('ssh/alpha', 'files'), 'generation 3', 'on the value now stored, it writes');
      }),
    );
  });
}

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { hostname } from 'node:os';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ownIdentity } from '../../src/adapters/host/process-identity.ts';
import { defaultControlPlane, type ControlPlane } from '../../src/api/control-plane.ts';
import type { EventRecord, MachineRecord } from '../../src/domain/machine.ts';
import { FencedOutError, StoreRefusedError, type LeaseHolder, type ProcessIdentity, type StateStore, type WriterLease } from '../../src/ports/state-store.ts';

const T0 = 1_000_000;

function manifest(name: string, replicas = 3): ControlPlane {
  const m = defaultControlPlane(name);
  return { ...m, spec: { ...m.spec, replicas } };
}

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

/** A PID that no process has: a child that already exited and was reaped. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  assert.ok(child.pid > 0, 'could not spawn a short-lived child');
  return child.pid;
}

/** This process as the kernel knows it: the tests run where /proc tells. */
function self(): ProcessIdentity {
  const identity = ownIdentity();
  assert.ok(identity, 'this process has an identity (/proc is readable and its own)');
  return identity;
}

type HolderOptions = Partial<Omit<LeaseHolder, 'identity'>> & { identity?: ProcessIdentity | null };

/** A holder record; by default this very process, alive (`identity: null`: a record without one). */
function holder(token: string, options: HolderOptions = {}): LeaseHolder {
  const { identity = self(), ...rest } = options;
  return { token, holder: `test:${token}`, host: hostname(), pid: process.pid, ttlMs: 10_000, ...(identity === null ? {} : { identity }), ...rest };
}

/** Another writer tries to take the lease: true when it did. */
const take = (store: StateStore, cluster: string): Promise<boolean> => store.acquireLease(cluster, holder(`taker-of-${cluster}`), T0 + 1);

/** Creates the control plane and takes its lease: what a reconcile pass starts from. */
async function leased(store: StateStore, name: string, token = `${name}-writer`): Promise<WriterLease> {
  await store.applySpec(manifest(name), T0);
  assert.equal(await store.acquireLease(name, holder(token), T0), true);
  return { cluster: name, token };
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
  const withStore = (body: (store: StateStore, other: StateStore) => Promise<void>) => async () => {
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

    test(
      'a lease: one holder at a time, taken over when released, or with force',
      withStore(async (store) => {
        await store.applySpec(manifest('alpha'), T0);
        assert.equal(await store.acquireLease('alpha', holder('first'), T0), true);
        assert.equal(await store.acquireLease('alpha', holder('second'), T0 + 1), false, 'a live holder keeps it');
        assert.equal(await store.acquireLease('alpha', holder('first'), T0 + 2), true, 'the same token re-acquires');
        assert.equal(await store.acquireLease('beta', holder('second'), T0), true, 'leases are per cluster');
        const renewed = await store.renewLease('alpha', 'first', T0 + 9_000);
        assert.equal(renewed?.renewedAt, T0 + 9_000, "the record is dated on the holder's clock, for messages");
        assert.equal(renewed.holder, 'test:first');
        assert.equal(await store.acquireLease('alpha', holder('second'), T0 + 9_001), false, 'renewed: still live');
        assert.equal(await store.acquireLease('alpha', holder('second'), T0 + 9_002, { force: true }), true, 'force takes it anyway');
        assert.equal(await store.renewLease('alpha', 'first', T0 + 9_003), undefined, 'the old holder learns it lost the lease');
        await store.releaseLease('alpha', 'first');
        assert.equal((await store.getLease('alpha'))?.token, 'second', 'a wrong token releases nothing');
        await store.releaseLease('alpha', 'second');
        assert.equal(await store.getLease('alpha'), undefined);
        assert.equal(await store.acquireLease('alpha', holder('successor'), T0 + 9_004), true);
      }),
    );

    test(
      'a lease not renewed within its TTL expires, whatever process it names',
      withStore(async (store, other) => {
        await store.applySpec(manifest('alpha'), T0);
        // A live holder (this process) that stops renewing: only its TTL frees the lease.
        assert.equal(await store.acquireLease('alpha', holder('short', { ttlMs: 1_000 }), Date.now()), true);
        assert.equal(await other.acquireLease('alpha', holder('next'), Date.now()), false, 'not expired yet');
        // On the store's clock (etcd: its own lease TTL, at least its minimum); the memory store's is the callers'.
        for (let tries = 0; !(await other.acquireLease('alpha', holder('next'), Date.now())); tries++) {
          assert.ok(tries < 100, 'the lease expired within 10 s of its 1 s TTL');
          await sleep(100);
        }
        assert.equal(await store.renewLease('alpha', 'short', Date.now()), undefined, 'the old holder learns it lost the lease');
        assert.equal((await store.getLease('alpha'))?.token, 'next');
      }),
    );

    test(
      'a holder of this host name but another boot or PID namespace, or with no identity, keeps its lease until it expires',
      withStore(async (store) => {
        const dead = deadPid();
        const gone = { ...self(), pid: dead };
        const others: [string, HolderOptions][] = [
          ['another boot', { pid: dead, identity: { ...gone, bootId: '00000000-0000-4000-8000-000000000000' } }],
          ['another PID namespace', { pid: dead, identity: { ...gone, pidNamespace: 'pid:[1]' } }],
          ['no identity (an older record)', { pid: dead, identity: null }],
        ];
        for (const [why, options] of others) {
          const cluster = `c-${String(others.findIndex(([w]) => w === why))}`;
          await store.applySpec(manifest(cluster), T0);
          assert.equal(await store.acquireLease(cluster, holder(`held-${cluster}`, options), T0), true);
          assert.equal(await take(store, cluster), false, `${why}: PID ${String(dead)} is free here, which proves nothing of that holder`);
          assert.equal((await store.getLease(cluster))?.token, `held-${cluster}`);
        }
      }),
    );

    test(
      'a holder proven gone on this host (same boot and PID namespace) is taken over at once: its PID free, or reused',
      withStore(async (store) => {
        const dead = deadPid();
        await store.applySpec(manifest('gone'), T0);
        // The host name it gave does not matter: boot and PID namespace are the proof.
        assert.equal(await store.acquireLease('gone', holder('exited', { pid: dead, host: 'renamed', identity: { ...self(), pid: dead } }), T0), true);
        assert.equal(await take(store, 'gone'), true, 'its PID is free');
        await store.applySpec(manifest('reused'), T0);
        // This process's PID, but recorded with another start time: the PID now names another process.
        assert.equal(await store.acquireLease('reused', holder('earlier', { identity: { ...self(), startTime: self().startTime - 1 } }), T0), true);
        assert.equal(await take(store, 'reused'), true, 'its PID was reused');
        await store.applySpec(manifest('alive'), T0);
        assert.equal(await store.acquireLease('alive', holder('running'), T0), true);
        assert.equal(await take(store, 'alive'), false, 'this very process still runs');
      }),
    );

    test(
      'a stop request reaches the holder through its renewal',
      withStore(async (store) => {
        await store.applySpec(manifest('alpha'), T0);
        await store.acquireLease('alpha', holder('holder'), T0);
        await store.requestStop('alpha', 'not-the-holder');
        assert.equal((await store.renewLease('alpha', 'holder', T0 + 1))?.stopRequested, false, 'a request naming another token changes nothing');
        await store.requestStop('alpha', 'holder');
        assert.equal((await store.renewLease('alpha', 'holder', T0 + 2))?.stopRequested, true);
      }),
    );

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
  });
}

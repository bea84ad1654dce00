import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { StateStore } from '../../src/ports/state-store.ts';
import { holder, manifest, self, T0, type HolderOptions } from '../support/state-store-records.ts';

/** Runs a case on a fresh store and, as `other`, a second connection to the same records. */
export type WithStore = (body: (store: StateStore, other: StateStore) => Promise<void>) => () => Promise<void>;

/** A PID that no process has: a child that already exited and was reaped. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ['-e', '']);
  assert.ok(child.pid > 0, 'could not spawn a short-lived child');
  return child.pid;
}

/** Another writer tries to take the lease: true when it did. */
const take = (store: StateStore, cluster: string): Promise<boolean> => store.acquireLease(cluster, holder(`taker-of-${cluster}`), T0 + 1);

/** The lease cases of the StateStore contract: one holder per cluster, expiry, takeover of a holder proven gone, stop requests. */
export function defineLeaseCases(withStore: WithStore): void {
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
    'each new holder of a lease gets a fence higher than any the store gave, on any cluster or connection; renewals keep it',
    withStore(async (store, other) => {
      await store.applySpec(manifest('alpha'), T0);
      await store.applySpec(manifest('beta'), T0);
      const fenceOf = async (cluster: string): Promise<number> => (await store.getLease(cluster))?.fence ?? Number.NaN;
      assert.equal(await store.acquireLease('alpha', holder('first'), T0), true);
      const first = await fenceOf('alpha');
      assert.ok(Number.isSafeInteger(first), 'the lease carries a fence');
      assert.equal(await store.acquireLease('alpha', holder('first'), T0 + 1), true);
      assert.equal((await store.renewLease('alpha', 'first', T0 + 2))?.fence, first, 'the same holder keeps its fence');
      assert.equal(await other.acquireLease('beta', holder('elsewhere'), T0 + 3), true);
      const beta = await fenceOf('beta');
      assert.ok(beta > first, 'another cluster, through another connection: higher still');
      assert.equal(await other.acquireLease('alpha', holder('second'), T0 + 4, { force: true }), true);
      const second = await fenceOf('alpha');
      assert.ok(second > beta, `taken over: ${String(second)} > ${String(beta)}`);
      await store.releaseLease('alpha', 'second');
      assert.equal(await store.acquireLease('alpha', holder('third'), T0 + 5), true);
      assert.ok((await fenceOf('alpha')) > second, 'released and taken again: never a number given before');
    }),
  );
}

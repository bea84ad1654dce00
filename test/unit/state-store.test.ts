import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { hostname, tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { defaultControlPlane } from '../../src/api/control-plane.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import { CorruptStateError, SCHEMA_VERSION, SqliteStateStore, openStateStore } from '../../src/adapters/stores/sqlite-state-store.ts';
import type { MachineRecord } from '../../src/domain/machine.ts';
import type { LeaseHolder, StateStore, WriterLease } from '../../src/ports/state-store.ts';
import { defineStateStoreContract } from '../contract/state-store-contract.ts';

defineStateStoreContract('memory', () => {
  const store = new MemoryStateStore();
  return { store, cleanup: () => store.close() };
});

defineStateStoreContract('sqlite', () => {
  const dir = tempDir();
  const store = openStateStore(dir);
  return {
    store,
    connect: () => openStateStore(dir),
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

const holder = (token: string, pid = process.pid): LeaseHolder => ({ token, holder: token, host: hostname(), pid, ttlMs: 10_000 });

test('memory: isHolderAlive decides whether a lease of this host can be taken over before its TTL', async () => {
  let alive = true;
  const store = new MemoryStateStore({ isHolderAlive: () => alive });
  assert.equal(await store.acquireLease('alpha', holder('a', 1234), 0), true);
  assert.equal(await store.acquireLease('alpha', holder('b', 5678), 1), false);
  alive = false;
  assert.equal(await store.acquireLease('alpha', holder('b', 5678), 2), true);
});

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'fastplane-state-'));
}

const alpha1: MachineRecord = {
  cluster: 'alpha',
  name: 'alpha-1',
  ordinal: 1,
  version: '3.4.23',
  templateHash: 'h1',
  createdAt: 1_001,
  phase: 'Voter',
  phaseTimes: { Pending: 1_001, Voter: 1_050 },
  role: 'init',
};

/** alpha with one machine and one event, under a lease held by `token`. */
async function seed(store: StateStore, token = 'first'): Promise<WriterLease> {
  await store.applySpec(defaultControlPlane('alpha'), 1_000);
  assert.equal(await store.acquireLease('alpha', holder(token), Date.now()), true);
  const lease = { cluster: 'alpha', token };
  await store.commit(lease, [
    { kind: 'CreateMachine', record: alpha1 },
    { kind: 'PatchControlPlane', patch: { initMachine: 'alpha-1', nextOrdinal: 2 } },
    { kind: 'AppendEvent', event: { cluster: 'alpha', at: 1_100, type: 'Normal', reason: 'Initialized', message: 'alpha-1 started' } },
  ]);
  return lease;
}

/** A temp state dir for one test; its stores are closed before the dir is removed. */
function scratch(t: TestContext) {
  const dir = tempDir();
  const opened: SqliteStateStore[] = [];
  t.after(async () => {
    for (const store of opened) await store.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });
  const track = (store: SqliteStateStore) => {
    opened.push(store);
    return store;
  };
  return {
    dir,
    open: () => track(openStateStore(dir)),
    openAt: (path: string) => track(new SqliteStateStore(path)),
    /** Reads pragmas and rows beside the store, as another process would. */
    raw: <T>(fn: (db: Database.Database) => T): T => {
      const db = new Database(join(dir, 'fastplane.db'));
      try {
        return fn(db);
      } finally {
        db.close();
      }
    },
  };
}

describe('SqliteStateStore', () => {
  test('creates missing parent directories', (t) => {
    const { dir, openAt } = scratch(t);
    const path = join(dir, 'nested', 'deeper', 'state.db');
    openAt(path);
    assert.ok(existsSync(path));
  });

  test('data and the lease survive close and reopen', async (t) => {
    const { open } = scratch(t);
    const first = open();
    await seed(first);
    await first.close();

    const second = open();
    assert.equal((await second.getControlPlane('alpha'))?.initMachine, 'alpha-1');
    assert.deepEqual(await second.listMachines('alpha'), [alpha1]);
    assert.deepEqual((await second.listEvents('alpha')).map((e) => e.reason), ['Initialized']);
    assert.equal(await second.acquireLease('alpha', holder('other'), Date.now()), false, 'the lease persisted');
  });

  test('sets the schema version and WAL journal', async (t) => {
    const { open, raw } = scratch(t);
    await open().close();
    assert.ok(SCHEMA_VERSION >= 2);
    raw((db) => {
      assert.equal(db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    });
  });

  test('a database of schema 1 (PID-only leases, no generations) is migrated and keeps its records', async (t) => {
    const { dir, open, raw } = scratch(t);
    raw((db) => {
      db.exec(`CREATE TABLE control_planes (name TEXT PRIMARY KEY NOT NULL, record TEXT NOT NULL, created_at INTEGER NOT NULL);
        CREATE TABLE machines (cluster TEXT NOT NULL, name TEXT NOT NULL, ordinal INTEGER NOT NULL, record TEXT NOT NULL, PRIMARY KEY (cluster, name));
        CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, cluster TEXT NOT NULL, at INTEGER NOT NULL, record TEXT NOT NULL);
        CREATE TABLE leases (cluster TEXT PRIMARY KEY NOT NULL, pid INTEGER NOT NULL, token TEXT NOT NULL, acquired_at INTEGER NOT NULL);`);
      const old = { name: 'alpha', manifest: defaultControlPlane('alpha'), createdAt: 1_000, clusterToken: 't', nextOrdinal: 2 };
      db.prepare('INSERT INTO control_planes VALUES (?, ?, ?)').run('alpha', JSON.stringify(old), 1_000);
      db.prepare('INSERT INTO leases VALUES (?, ?, ?, ?)').run('alpha', process.pid, 'old', 1_000);
      db.pragma('user_version = 1');
    });
    assert.ok(existsSync(join(dir, 'fastplane.db')));
    const store = open();
    assert.equal((await store.getControlPlane('alpha'))?.generation, 1);
    assert.equal(await store.getLease('alpha'), undefined, 'a PID-only lease cannot be judged by time: dropped');
    assert.equal(await store.acquireLease('alpha', holder('new'), Date.now()), true);
    assert.equal(await store.claim('slots', '1', 'alpha'), true, 'the claims table was added');
  });

  test('refuses a database from a newer schema version', async (t) => {
    const { open, raw } = scratch(t);
    await open().close();
    raw((db) => db.pragma(`user_version = ${String(SCHEMA_VERSION + 1)}`));
    assert.throws(open, /newer than this fastplane supports/);
  });

  test('a corrupt row fails with an error naming its table and key', async (t) => {
    const { open, raw } = scratch(t);
    const store = open();
    await seed(store);
    raw((db) => {
      db.prepare(`UPDATE control_planes SET record = '{"name":' WHERE name = 'alpha'`).run();
      db.prepare(`UPDATE machines SET record = '{"cluster":"alpha","name":"alpha-1"}'`).run();
    });
    await assert.rejects(
      store.getControlPlane('alpha'),
      (error) => error instanceof CorruptStateError && error.table === 'control_planes' && error.key === 'alpha' && /row alpha of table control_planes is corrupt: not JSON/.test(error.message),
    );
    await assert.rejects(
      store.listMachines('alpha'),
      (error) => error instanceof CorruptStateError && error.table === 'machines' && error.key === 'alpha/alpha-1' && /field ordinal is missing/.test(error.message),
    );
  });

  test('two connections to one file share the lease and its fencing', async (t) => {
    const { open } = scratch(t);
    const one = open();
    const two = open();
    const lease = await seed(one, 'one');
    assert.equal(await two.acquireLease('alpha', holder('two'), Date.now()), false);
    await one.releaseLease('alpha', 'one');
    assert.equal(await two.acquireLease('alpha', holder('two'), Date.now()), true);
    await assert.rejects(one.commit(lease, [{ kind: 'DeleteMachine', name: 'alpha-1' }]), /no longer holds the lease/);
    assert.equal((await two.listMachines('alpha')).length, 1);
  });
});

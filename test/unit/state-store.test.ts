import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test, type TestContext } from 'node:test';
import Database from 'better-sqlite3';
import { defaultControlPlane } from '../../src/api/control-plane.ts';
import { MemoryStateStore } from '../../src/adapters/memory-state-store.ts';
import {
  CorruptStateError,
  SCHEMA_VERSION,
  SqliteStateStore,
  openStateStore,
} from '../../src/adapters/sqlite-state-store.ts';
import type { ControlPlaneRecord, MachineRecord } from '../../src/domain/machine.ts';
import { defineStateStoreContract } from '../contract/state-store-contract.ts';

defineStateStoreContract('memory', () => {
  const store = new MemoryStateStore();
  return { store, cleanup: () => { store.close(); } };
});

defineStateStoreContract('sqlite', () => {
  const dir = tempDir();
  const store = openStateStore(dir);
  return {
    store,
    cleanup: () => {
      store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

test('memory: isHolderAlive decides whether a foreign lease can be taken over', () => {
  let alive = true;
  const store = new MemoryStateStore({ isHolderAlive: () => alive });
  assert.equal(store.acquireLease('alpha', { pid: 1234, token: 'a' }), true);
  assert.equal(store.acquireLease('alpha', { pid: 5678, token: 'b' }), false);
  alive = false;
  assert.equal(store.acquireLease('alpha', { pid: 5678, token: 'b' }), true);
});

function tempDir(): string {
  return mkdtempSync(join(tmpdir(), 'fastplane-state-'));
}

const alpha: ControlPlaneRecord = {
  name: 'alpha',
  manifest: defaultControlPlane('alpha'),
  createdAt: 1_000,
  clusterToken: 'alpha-token',
  nextOrdinal: 2,
  initMachine: 'alpha-1',
};

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

/** A temp state dir for one test; its stores are closed before the dir is removed. */
function scratch(t: TestContext) {
  const dir = tempDir();
  const opened: SqliteStateStore[] = [];
  t.after(() => {
    for (const store of opened) store.close(); // closing twice is harmless
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

  test('data survives close and reopen', (t) => {
    const { open } = scratch(t);
    const first = open();
    first.putControlPlane(alpha);
    first.putMachine(alpha1);
    first.appendEvent({ cluster: 'alpha', at: 1_100, type: 'Normal', reason: 'Initialized', message: 'alpha-1 started' });
    assert.equal(first.acquireLease('alpha', { pid: process.pid, token: 'first' }), true);
    first.close();

    const second = open();
    assert.deepEqual(second.getControlPlane('alpha'), alpha);
    assert.deepEqual(second.listMachines('alpha'), [alpha1]);
    assert.deepEqual(second.listEvents('alpha').map((e) => e.reason), ['Initialized']);
    assert.equal(second.acquireLease('alpha', { pid: process.pid, token: 'other' }), false, 'the lease persisted');
  });

  test('sets the schema version and WAL journal', (t) => {
    const { open, raw } = scratch(t);
    open().close();
    assert.ok(SCHEMA_VERSION >= 1);
    raw((db) => {
      assert.equal(db.pragma('user_version', { simple: true }), SCHEMA_VERSION);
      assert.equal(db.pragma('journal_mode', { simple: true }), 'wal');
    });
  });

  test('reopening an existing database does not re-run migrations', (t) => {
    const { open, raw } = scratch(t);
    const first = open();
    first.putControlPlane(alpha);
    first.putMachine(alpha1);
    first.close();

    // The migrations use plain CREATE TABLE, so running them again would throw here.
    const second = open();
    assert.equal(
      raw((db) => db.pragma('user_version', { simple: true })),
      SCHEMA_VERSION,
    );
    assert.deepEqual(second.listControlPlanes(), [alpha]);
    assert.deepEqual(second.listMachines('alpha'), [alpha1]);
  });

  test('refuses a database from a newer schema version', (t) => {
    const { open, raw } = scratch(t);
    open().close();
    raw((db) => db.pragma(`user_version = ${SCHEMA_VERSION + 1}`));
    assert.throws(open, /newer than this fastplane supports/);
  });

  test('a corrupt row fails with an error naming its table and key', (t) => {
    const { open, raw } = scratch(t);
    const store = open();
    store.putControlPlane(alpha);
    store.putMachine(alpha1);
    raw((db) => {
      db.prepare(`UPDATE control_planes SET record = '{"name":' WHERE name = 'alpha'`).run();
      db.prepare(`UPDATE machines SET record = '{"cluster":"alpha","name":"alpha-1"}'`).run();
    });

    assert.throws(
      () => store.getControlPlane('alpha'),
      (error) =>
        error instanceof CorruptStateError &&
        error.table === 'control_planes' &&
        error.key === 'alpha' &&
        /row alpha of table control_planes is corrupt: not JSON/.test(error.message),
    );
    assert.throws(
      () => store.listMachines('alpha'),
      (error) =>
        error instanceof CorruptStateError &&
        error.table === 'machines' &&
        error.key === 'alpha/alpha-1' &&
        /row alpha\/alpha-1 of table machines is corrupt: field ordinal is missing/.test(error.message),
    );
  });

  test('two connections to one file share the lease', (t) => {
    const { open } = scratch(t);
    const one = open();
    const two = open();
    assert.equal(one.acquireLease('alpha', { pid: process.pid, token: 'one' }), true);
    assert.equal(two.acquireLease('alpha', { pid: process.pid, token: 'two' }), false);
    one.releaseLease('alpha', 'one');
    assert.equal(two.acquireLease('alpha', { pid: process.pid, token: 'two' }), true);
  });
});

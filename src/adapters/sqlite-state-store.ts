import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../domain/machine.ts';
import type { StateStore } from '../ports/state-store.ts';
import { isProcessAlive } from './process-status.ts';

/**
 * Schema migrations, applied in order; the database's `PRAGMA user_version` counts how many ran.
 * Append new versions, never edit a released one. Records are JSON so that adding an optional field
 * needs no migration; the columns beside them exist for keys and ordering only.
 */
const MIGRATIONS: readonly string[] = [
  `
  CREATE TABLE control_planes (
    name TEXT PRIMARY KEY NOT NULL,
    record TEXT NOT NULL,
    created_at INTEGER NOT NULL
  );
  CREATE TABLE machines (
    cluster TEXT NOT NULL,
    name TEXT NOT NULL,
    ordinal INTEGER NOT NULL,
    record TEXT NOT NULL,
    PRIMARY KEY (cluster, name)
  );
  CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    cluster TEXT NOT NULL,
    at INTEGER NOT NULL,
    record TEXT NOT NULL
  );
  CREATE INDEX events_by_cluster ON events (cluster, id);
  CREATE TABLE leases (
    cluster TEXT PRIMARY KEY NOT NULL,
    pid INTEGER NOT NULL,
    token TEXT NOT NULL,
    acquired_at INTEGER NOT NULL
  );
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

/** A stored row that does not hold the record it should; names the table and key so it can be found. */
export class CorruptStateError extends Error {
  override readonly name = 'CorruptStateError';
  constructor(
    readonly table: string,
    readonly key: string,
    detail: string,
  ) {
    super(`state store: row ${key} of table ${table} is corrupt: ${detail}`);
  }
}

type FieldKind = 'string' | 'number' | 'object';

// The required fields checked on read: enough to catch a truncated or foreign row, not a full schema.
const CONTROL_PLANE_FIELDS = {
  name: 'string',
  manifest: 'object',
  createdAt: 'number',
  clusterToken: 'string',
  nextOrdinal: 'number',
} as const satisfies Partial<Record<keyof ControlPlaneRecord, FieldKind>>;

const MACHINE_FIELDS = {
  cluster: 'string',
  name: 'string',
  ordinal: 'number',
  version: 'string',
  templateHash: 'string',
  createdAt: 'number',
  phase: 'string',
  phaseTimes: 'object',
} as const satisfies Partial<Record<keyof MachineRecord, FieldKind>>;

const EVENT_FIELDS = {
  cluster: 'string',
  at: 'number',
  type: 'string',
  reason: 'string',
  message: 'string',
} as const satisfies Partial<Record<keyof EventRecord, FieldKind>>;

/** Parses a row's JSON and checks its required fields; the caller names the record type it holds. */
function decode(table: string, key: string, text: string, fields: Readonly<Record<string, FieldKind>>): object {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new CorruptStateError(table, key, `not JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CorruptStateError(table, key, 'not a JSON object');
  }
  const record = value as Record<string, unknown>;
  for (const [field, kind] of Object.entries(fields)) {
    const present = record[field];
    const ok = kind === 'object' ? typeof present === 'object' && present !== null : typeof present === kind;
    if (!ok) throw new CorruptStateError(table, key, `field ${field} is missing or not a ${kind}`);
  }
  return record;
}

interface RecordRow {
  key: string;
  record: string;
}

function prepareStatements(db: Database.Database) {
  return {
    getControlPlane: db.prepare<[string], RecordRow>('SELECT name AS key, record FROM control_planes WHERE name = ?'),
    listControlPlanes: db.prepare<[], RecordRow>('SELECT name AS key, record FROM control_planes ORDER BY created_at, name'),
    putControlPlane: db.prepare<[string, string, number]>(
      `INSERT INTO control_planes (name, record, created_at) VALUES (?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET record = excluded.record, created_at = excluded.created_at`,
    ),
    deleteControlPlane: db.prepare<[string]>('DELETE FROM control_planes WHERE name = ?'),
    deleteClusterMachines: db.prepare<[string]>('DELETE FROM machines WHERE cluster = ?'),
    deleteClusterEvents: db.prepare<[string]>('DELETE FROM events WHERE cluster = ?'),
    listMachines: db.prepare<[string], RecordRow>(
      `SELECT cluster || '/' || name AS key, record FROM machines WHERE cluster = ? ORDER BY ordinal, name`,
    ),
    getMachine: db.prepare<[string, string], RecordRow>(
      `SELECT cluster || '/' || name AS key, record FROM machines WHERE cluster = ? AND name = ?`,
    ),
    putMachine: db.prepare<[string, string, number, string]>(
      `INSERT INTO machines (cluster, name, ordinal, record) VALUES (?, ?, ?, ?)
       ON CONFLICT (cluster, name) DO UPDATE SET ordinal = excluded.ordinal, record = excluded.record`,
    ),
    deleteMachine: db.prepare<[string, string]>('DELETE FROM machines WHERE cluster = ? AND name = ?'),
    appendEvent: db.prepare<[string, number, string]>('INSERT INTO events (cluster, at, record) VALUES (?, ?, ?)'),
    listEvents: db.prepare<[string], RecordRow>(
      `SELECT '#' || id AS key, record FROM events WHERE cluster = ? ORDER BY id`,
    ),
    getLease: db.prepare<[string], { pid: number; token: string }>('SELECT pid, token FROM leases WHERE cluster = ?'),
    putLease: db.prepare<[string, number, string, number]>(
      `INSERT INTO leases (cluster, pid, token, acquired_at) VALUES (?, ?, ?, ?)
       ON CONFLICT (cluster) DO UPDATE SET pid = excluded.pid, token = excluded.token, acquired_at = excluded.acquired_at`,
    ),
    deleteLease: db.prepare<[string]>('DELETE FROM leases WHERE cluster = ?'),
    releaseLease: db.prepare<[string, string]>('DELETE FROM leases WHERE cluster = ? AND token = ?'),
  };
}

/** The durable StateStore: one SQLite file shared by every fastplane process on the host. */
export class SqliteStateStore implements StateStore {
  private readonly db: Database.Database;
  private readonly statements: ReturnType<typeof prepareStatements>;

  constructor(path: string) {
    mkdirSync(dirname(path), { recursive: true });
    this.db = new Database(path);
    try {
      // busy_timeout first: switching to WAL itself needs a lock another process may hold.
      this.db.pragma('busy_timeout = 5000');
      this.db.pragma('journal_mode = WAL');
      this.migrate(path);
      this.statements = prepareStatements(this.db);
    } catch (error) {
      this.db.close();
      throw error;
    }
  }

  /** Reads the version inside the write transaction, so two processes opening a new file migrate it once. */
  private migrate(path: string): void {
    this.db
      .transaction(() => {
        const version = this.db.pragma('user_version', { simple: true });
        if (typeof version !== 'number') throw new Error(`${path}: cannot read the schema version`);
        if (version > SCHEMA_VERSION) {
          throw new Error(`${path}: schema version ${version} is newer than this fastplane supports (${SCHEMA_VERSION})`);
        }
        for (const [index, sql] of MIGRATIONS.entries()) {
          if (index < version) continue;
          this.db.exec(sql);
          this.db.pragma(`user_version = ${index + 1}`);
        }
      })
      .immediate();
  }

  getControlPlane(name: string): ControlPlaneRecord | undefined {
    const row = this.statements.getControlPlane.get(name);
    return row && decodeControlPlane(row);
  }

  listControlPlanes(): ControlPlaneRecord[] {
    return this.statements.listControlPlanes.all().map(decodeControlPlane);
  }

  putControlPlane(record: ControlPlaneRecord): void {
    this.statements.putControlPlane.run(record.name, JSON.stringify(record), record.createdAt);
  }

  deleteControlPlane(name: string): void {
    this.transaction(() => {
      this.statements.deleteControlPlane.run(name);
      this.statements.deleteClusterMachines.run(name);
      this.statements.deleteClusterEvents.run(name);
      this.statements.deleteLease.run(name);
    });
  }

  listMachines(cluster: string): MachineRecord[] {
    return this.statements.listMachines.all(cluster).map(decodeMachine);
  }

  getMachine(cluster: string, name: string): MachineRecord | undefined {
    const row = this.statements.getMachine.get(cluster, name);
    return row && decodeMachine(row);
  }

  putMachine(record: MachineRecord): void {
    this.statements.putMachine.run(record.cluster, record.name, record.ordinal, JSON.stringify(record));
  }

  deleteMachine(cluster: string, name: string): void {
    this.statements.deleteMachine.run(cluster, name);
  }

  appendEvent(event: EventRecord): void {
    this.statements.appendEvent.run(event.cluster, event.at, JSON.stringify(event));
  }

  listEvents(cluster: string): EventRecord[] {
    return this.statements.listEvents.all(cluster).map(decodeEvent);
  }

  /**
   * BEGIN IMMEDIATE: callers read then write, and in WAL mode a deferred transaction that upgrades to
   * a write after another process committed fails with SQLITE_BUSY at once instead of waiting.
   * Nested calls become savepoints.
   */
  transaction<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  acquireLease(cluster: string, holder: { pid: number; token: string }): boolean {
    return this.transaction(() => {
      const current = this.statements.getLease.get(cluster);
      if (current && current.token !== holder.token && isProcessAlive(current.pid)) return false;
      this.statements.putLease.run(cluster, holder.pid, holder.token, Date.now());
      return true;
    });
  }

  releaseLease(cluster: string, token: string): void {
    this.statements.releaseLease.run(cluster, token);
  }

  close(): void {
    this.db.close();
  }
}

function decodeControlPlane(row: RecordRow): ControlPlaneRecord {
  return decode('control_planes', row.key, row.record, CONTROL_PLANE_FIELDS) as ControlPlaneRecord;
}

function decodeMachine(row: RecordRow): MachineRecord {
  return decode('machines', row.key, row.record, MACHINE_FIELDS) as MachineRecord;
}

function decodeEvent(row: RecordRow): EventRecord {
  return decode('events', row.key, row.record, EVENT_FIELDS) as EventRecord;
}

/** The store kept in a fastplane state directory. */
export function openStateStore(stateDir: string): SqliteStateStore {
  return new SqliteStateStore(join(stateDir, 'fastplane.db'));
}

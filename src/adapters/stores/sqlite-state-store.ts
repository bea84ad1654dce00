import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import { hostname } from 'node:os';
import type { ControlPlane } from '../../api/control-plane.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../domain/machine.ts';
import { applySpecTo, deriveControlPlane, patchControlPlane, patchMachine } from '../../domain/record-writes.ts';
import {
  FencedOutError,
  leaseIsFree,
  type AppliedSpec,
  type LeaseHolder,
  type LeaseRecord,
  type ResourceClaim,
  type SpecWatch,
  type StateStore,
  type StoreWrite,
  type WriterLease,
} from '../../ports/state-store.ts';
import { isProcessAlive } from '../providers/local/process-status.ts';
import { watchSqliteSpecs } from './sqlite-spec-watch.ts';

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
  // Leases renewed by their holder, judged by time: a row is the JSON LeaseRecord. Old leases are
  // PID-only and cannot be judged that way; dropping them only makes their clusters free to take.
  `
  DROP TABLE leases;
  CREATE TABLE leases (
    cluster TEXT PRIMARY KEY NOT NULL,
    record TEXT NOT NULL
  );
  `,
  // Resource claims (address slots and the like), shared by every process using this file.
  `
  CREATE TABLE claims (
    pool TEXT NOT NULL,
    key TEXT NOT NULL,
    owner TEXT NOT NULL,
    PRIMARY KEY (pool, key)
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

const LEASE_FIELDS = {
  cluster: 'string',
  token: 'string',
  holder: 'string',
  host: 'string',
  pid: 'number',
  ttlMs: 'number',
  acquiredAt: 'number',
  renewedAt: 'number',
} as const satisfies Partial<Record<keyof LeaseRecord, FieldKind>>;

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
    listEvents: db.prepare<[string, number], RecordRow & { id: number }>(
      `SELECT '#' || id AS key, id, record FROM events WHERE cluster = ? AND id > ? ORDER BY id`,
    ),
    getLease: db.prepare<[string], RecordRow>('SELECT cluster AS key, record FROM leases WHERE cluster = ?'),
    putLease: db.prepare<[string, string]>(
      `INSERT INTO leases (cluster, record) VALUES (?, ?) ON CONFLICT (cluster) DO UPDATE SET record = excluded.record`,
    ),
    deleteLease: db.prepare<[string]>('DELETE FROM leases WHERE cluster = ?'),
    insertClaim: db.prepare<[string, string, string]>('INSERT INTO claims (pool, key, owner) VALUES (?, ?, ?) ON CONFLICT (pool, key) DO NOTHING'),
    getClaim: db.prepare<[string, string], { owner: string }>('SELECT owner FROM claims WHERE pool = ? AND key = ?'),
    deleteClaim: db.prepare<[string, string, string]>('DELETE FROM claims WHERE pool = ? AND key = ? AND owner = ?'),
    listClaims: db.prepare<[string], ResourceClaim>('SELECT pool, key, owner FROM claims WHERE pool = ? ORDER BY key'),
  };
}

/** The durable StateStore: one SQLite file shared by every fastplane process on the host. */
export class SqliteStateStore implements StateStore {
  private readonly db: Database.Database;
  private readonly statements: ReturnType<typeof prepareStatements>;
  private readonly host = hostname();

  constructor(private readonly path: string) {
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
    this.immediate(() => {
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
    });
  }

  /**
   * BEGIN IMMEDIATE: every write transaction reads first (the lease, the current record), and in WAL
   * mode a deferred transaction that upgrades to a write after another process committed fails with
   * SQLITE_BUSY at once instead of waiting.
   */
  private immediate<T>(fn: () => T): T {
    return this.db.transaction(fn).immediate();
  }

  getControlPlane(name: string): Promise<ControlPlaneRecord | undefined> {
    return settle(() => this.readControlPlane(name));
  }

  listControlPlanes(): Promise<ControlPlaneRecord[]> {
    return settle(() => this.statements.listControlPlanes.all().map(decodeControlPlane));
  }

  listMachines(cluster: string): Promise<MachineRecord[]> {
    return settle(() => this.statements.listMachines.all(cluster).map(decodeMachine));
  }

  getMachine(cluster: string, name: string): Promise<MachineRecord | undefined> {
    return settle(() => this.readMachine(cluster, name));
  }

  listEvents(cluster: string, afterSeq = 0): Promise<EventRecord[]> {
    return settle(() => this.statements.listEvents.all(cluster, afterSeq).map((row) => ({ ...decodeEvent(row), seq: row.id })));
  }

  applySpec(manifest: ControlPlane, now: number): Promise<AppliedSpec> {
    return settle(() =>
      this.immediate(() => {
        const applied = applySpecTo(this.readControlPlane(manifest.metadata.name), manifest, now);
        if (applied.changed) this.writeControlPlane(applied.record);
        return applied;
      }),
    );
  }

  commit(lease: WriterLease, writes: readonly StoreWrite[]): Promise<void> {
    return settle(() => { this.immediate(() => {
        this.assertHolds(lease);
        const cluster = lease.cluster;
        for (const write of writes) {
          switch (write.kind) {
            case 'CreateMachine':
              if (!this.readMachine(cluster, write.record.name)) this.writeMachine(write.record);
              break;
            case 'PatchMachine': {
              const current = this.readMachine(cluster, write.name);
              if (current) this.writeMachine(patchMachine(current, write.set, write.unset));
              break;
            }
            case 'DeleteMachine':
              this.statements.deleteMachine.run(cluster, write.name);
              break;
            case 'PatchControlPlane': {
              const current = this.readControlPlane(cluster);
              if (current) this.writeControlPlane(patchControlPlane(current, write.patch));
              break;
            }
            case 'ReserveOrdinal':
            case 'RecordRemediation':
          case 'AbandonInit': {
              const current = this.readControlPlane(cluster);
              if (current) this.writeControlPlane(deriveControlPlane(current, write));
              break;
            }
            case 'AppendEvent':
              this.statements.appendEvent.run(cluster, write.event.at, JSON.stringify({ ...write.event, cluster }));
              break;
          }
        }
      }); },
    );
  }

  deleteControlPlane(lease: WriterLease): Promise<void> {
    return settle(() => { this.immediate(() => {
        this.assertHolds(lease);
        this.statements.deleteControlPlane.run(lease.cluster);
        this.statements.deleteClusterMachines.run(lease.cluster);
        this.statements.deleteClusterEvents.run(lease.cluster);
        this.statements.deleteLease.run(lease.cluster);
      }); },
    );
  }

  acquireLease(cluster: string, holder: LeaseHolder, now: number, options: { force?: boolean } = {}): Promise<boolean> {
    return settle(() =>
      this.immediate(() => {
        const current = this.readLease(cluster);
        const taken = current !== undefined && current.token !== holder.token && !leaseIsFree(current, now, this.host, isProcessAlive);
        if (taken && options.force !== true) return false;
        const acquiredAt = current?.token === holder.token ? current.acquiredAt : now;
        this.writeLease({ ...holder, cluster, acquiredAt, renewedAt: now, stopRequested: false });
        return true;
      }),
    );
  }

  renewLease(cluster: string, token: string, now: number): Promise<LeaseRecord | undefined> {
    return settle(() =>
      this.immediate(() => {
        const current = this.readLease(cluster);
        if (current?.token !== token) return undefined;
        const renewed = { ...current, renewedAt: now };
        this.writeLease(renewed);
        return renewed;
      }),
    );
  }

  releaseLease(cluster: string, token: string): Promise<void> {
    return settle(() => { this.immediate(() => {
        if (this.readLease(cluster)?.token === token) this.statements.deleteLease.run(cluster);
      }); },
    );
  }

  getLease(cluster: string): Promise<LeaseRecord | undefined> {
    return settle(() => this.readLease(cluster));
  }

  requestStop(cluster: string, token: string): Promise<void> {
    return settle(() => { this.immediate(() => {
        const current = this.readLease(cluster);
        if (current?.token === token) this.writeLease({ ...current, stopRequested: true });
      }); },
    );
  }

  watchSpecs(onChange: (cluster: string) => void): SpecWatch {
    return watchSqliteSpecs(this.path, onChange);
  }

  claim(pool: string, key: string, owner: string): Promise<boolean> {
    return settle(() =>
      this.immediate(() => {
        this.statements.insertClaim.run(pool, key, owner);
        return this.statements.getClaim.get(pool, key)?.owner === owner;
      }),
    );
  }

  releaseClaim(pool: string, key: string, owner: string): Promise<void> {
    return settle(() => {
      this.statements.deleteClaim.run(pool, key, owner);
    });
  }

  listClaims(pool: string): Promise<ResourceClaim[]> {
    return settle(() => this.statements.listClaims.all(pool));
  }

  close(): Promise<void> {
    return settle(() => {
      this.db.close();
    });
  }

  private assertHolds(lease: WriterLease): void {
    if (this.readLease(lease.cluster)?.token !== lease.token) throw new FencedOutError(lease.cluster);
  }

  private readControlPlane(name: string): ControlPlaneRecord | undefined {
    const row = this.statements.getControlPlane.get(name);
    return row && decodeControlPlane(row);
  }

  private writeControlPlane(record: ControlPlaneRecord): void {
    this.statements.putControlPlane.run(record.name, JSON.stringify(record), record.createdAt);
  }

  private readMachine(cluster: string, name: string): MachineRecord | undefined {
    const row = this.statements.getMachine.get(cluster, name);
    return row && decodeMachine(row);
  }

  private writeMachine(record: MachineRecord): void {
    this.statements.putMachine.run(record.cluster, record.name, record.ordinal, JSON.stringify(record));
  }

  private readLease(cluster: string): LeaseRecord | undefined {
    const row = this.statements.getLease.get(cluster);
    return row && (decode('leases', row.key, row.record, LEASE_FIELDS) as LeaseRecord);
  }

  private writeLease(lease: LeaseRecord): void {
    this.statements.putLease.run(lease.cluster, JSON.stringify(lease));
  }
}

/** The synchronous driver's result or error as a promise: callers see one asynchronous port. */
function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}

function decodeControlPlane(row: RecordRow): ControlPlaneRecord {
  const record = decode('control_planes', row.key, row.record, CONTROL_PLANE_FIELDS) as Omit<ControlPlaneRecord, 'generation'> & { generation?: number };
  // Records written before generations existed are generation 1.
  return { ...record, generation: record.generation ?? 1 };
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

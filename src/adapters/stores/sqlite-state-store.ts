import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import type { ControlPlane } from '../../api/control-plane.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../domain/machine.ts';
import { applySpecTo, deriveControlPlane, patchControlPlane, patchMachine } from '../../domain/record-writes.ts';
import {
  FencedOutError,
  type AppliedSpec,
  type LeaseHolder,
  type LeaseRecord,
  type ResourceClaim,
  type SpecWatch,
  type StateStore,
  type StoreWrite,
  type WriterLease,
} from '../../ports/state-store.ts';
import { bootClock } from '../host/boot-clock.ts';
import { isProvenGone } from '../host/process-identity.ts';
import { CorruptStateError, decodeControlPlane, decodeEvent, decodeLease, decodeMachine } from './record-codec.ts';
import { watchSqliteSpecs } from './sqlite-spec-watch.ts';

export { CorruptStateError };

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
  // When a lease was last renewed on the host's boot clock (the record's times are its writers' own
  // clocks): the only time its expiry is judged by. Rows written before have no boot ('').
  `
  ALTER TABLE leases ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';
  ALTER TABLE leases ADD COLUMN renewed_boot_ms INTEGER NOT NULL DEFAULT 0;
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

interface RecordRow {
  key: string;
  record: string;
}

interface LeaseRow extends RecordRow {
  boot_id: string;
  renewed_boot_ms: number;
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
    getLease: db.prepare<[string], LeaseRow>('SELECT cluster AS key, record, boot_id, renewed_boot_ms FROM leases WHERE cluster = ?'),
    /** A new holder or a renewal: the record and when, on the boot clock. */
    putLease: db.prepare<[string, string, string, number]>(
      `INSERT INTO leases (cluster, record, boot_id, renewed_boot_ms) VALUES (?, ?, ?, ?)
       ON CONFLICT (cluster) DO UPDATE SET record = excluded.record, boot_id = excluded.boot_id, renewed_boot_ms = excluded.renewed_boot_ms`,
    ),
    /** The record only (a stop request): the lease lives no longer for it. */
    updateLeaseRecord: db.prepare<[string, string]>('UPDATE leases SET record = ? WHERE cluster = ?'),
    deleteLease: db.prepare<[string]>('DELETE FROM leases WHERE cluster = ?'),
    insertClaim: db.prepare<[string, string, string]>('INSERT INTO claims (pool, key, owner) VALUES (?, ?, ?) ON CONFLICT (pool, key) DO NOTHING'),
    getClaim: db.prepare<[string, string], { owner: string }>('SELECT owner FROM claims WHERE pool = ? AND key = ?'),
    deleteClaim: db.prepare<[string, string, string]>('DELETE FROM claims WHERE pool = ? AND key = ? AND owner = ?'),
    listClaims: db.prepare<[string], ResourceClaim>('SELECT pool, key, owner FROM claims WHERE pool = ? ORDER BY key'),
  };
}

/**
 * The durable StateStore: one SQLite file shared by every fastplane process on the host. A lease's
 * expiry is judged on the host's boot clock (src/adapters/host/boot-clock.ts), which all those
 * processes share, never on the callers' own clocks.
 */
export class SqliteStateStore implements StateStore {
  private readonly db: Database.Database;
  private readonly statements: ReturnType<typeof prepareStatements>;

  constructor(private readonly path: string) {
    mkdirSync(dirname(path), { recursive: true, mode: 0o700 });
    // Created 0600 before SQLite opens it: SQLite gives the -wal and -shm files the database's mode.
    if (path !== ':memory:') closeSync(openSync(path, 'a', 0o600));
    this.db = new Database(path);
    try {
      // busy_timeout first: switching to WAL itself needs a lock another process may hold.
      this.db.pragma('busy_timeout = 5000');
      this.db.pragma('journal_mode = WAL');
      // Files an older version created with the umask's mode become private too.
      if (path !== ':memory:') for (const file of [path, `${path}-wal`, `${path}-shm`]) if (existsSync(file)) chmodSync(file, 0o600);
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
    return settle(() => this.statements.listControlPlanes.all().map((row) => decodeControlPlane('control_planes', row.key, row.record)));
  }

  listMachines(cluster: string): Promise<MachineRecord[]> {
    return settle(() => this.statements.listMachines.all(cluster).map((row) => decodeMachine('machines', row.key, row.record)));
  }

  getMachine(cluster: string, name: string): Promise<MachineRecord | undefined> {
    return settle(() => this.readMachine(cluster, name));
  }

  listEvents(cluster: string, afterSeq = 0): Promise<EventRecord[]> {
    return settle(() => this.statements.listEvents.all(cluster, afterSeq).map((row) => ({ ...decodeEvent('events', row.key, row.record), seq: row.id })));
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
        const row = this.statements.getLease.get(cluster);
        const current = row && this.leaseOf(row);
        const taken = row !== undefined && current !== undefined && current.token !== holder.token && !expired(row, current) && !isProvenGone(current.identity);
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
        if (current?.token === token) this.statements.updateLeaseRecord.run(JSON.stringify({ ...current, stopRequested: true }), cluster);
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
    return row && decodeControlPlane('control_planes', row.key, row.record);
  }

  private writeControlPlane(record: ControlPlaneRecord): void {
    this.statements.putControlPlane.run(record.name, JSON.stringify(record), record.createdAt);
  }

  private readMachine(cluster: string, name: string): MachineRecord | undefined {
    const row = this.statements.getMachine.get(cluster, name);
    return row && decodeMachine('machines', row.key, row.record);
  }

  private writeMachine(record: MachineRecord): void {
    this.statements.putMachine.run(record.cluster, record.name, record.ordinal, JSON.stringify(record));
  }

  private readLease(cluster: string): LeaseRecord | undefined {
    const row = this.statements.getLease.get(cluster);
    return row && this.leaseOf(row);
  }

  private leaseOf(row: LeaseRow): LeaseRecord {
    return decodeLease('leases', row.key, row.record);
  }

  /** Dated on the boot clock: the lease lives its TTL from now, whatever the caller's clock says. */
  private writeLease(lease: LeaseRecord): void {
    const clock = bootClock();
    this.statements.putLease.run(lease.cluster, JSON.stringify(lease), clock?.bootId ?? '', clock?.ms ?? 0);
  }
}

/**
 * Not renewed within its TTL on this boot's clock. A row of another boot (written before the host
 * restarted) or without one (an older fastplane, a host without /proc) can only be judged by the
 * record's own time, on this host's wall clock.
 */
function expired(row: LeaseRow, lease: LeaseRecord): boolean {
  const clock = bootClock();
  if (clock !== undefined && row.boot_id === clock.bootId) return clock.ms - row.renewed_boot_ms > lease.ttlMs;
  return Date.now() - lease.renewedAt > lease.ttlMs;
}

/** The synchronous driver's result or error as a promise: callers see one asynchronous port. */
function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (error) {
    return Promise.reject(error instanceof Error ? error : new Error(String(error)));
  }
}

/** The store kept in a fastplane state directory. */
export function openStateStore(stateDir: string): SqliteStateStore {
  return new SqliteStateStore(join(stateDir, 'fastplane.db'));
}

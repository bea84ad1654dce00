import type Database from 'better-sqlite3';
import type { ResourceClaim, StoredDocument } from '../../ports/state-store.ts';

/**
 * Schema migrations, applied in order; the database's `PRAGMA user_version` counts how many ran.
 * Append new versions, never edit a released one. Records are JSON so that adding an optional field
 * needs no migration; the columns beside them exist for keys and ordering only.
 */
export const MIGRATIONS: readonly string[] = [
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
  // Providers' own state of a cluster (its CA, its machines), kept beside its records.
  `
  CREATE TABLE documents (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    PRIMARY KEY (scope, key)
  );
  `,
];

export const SCHEMA_VERSION = MIGRATIONS.length;

interface RecordRow {
  key: string;
  record: string;
}

export interface LeaseRow extends RecordRow {
  boot_id: string;
  renewed_boot_ms: number;
}

export function prepareStatements(db: Database.Database) {
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
    getDocument: db.prepare<[string, string], { value: string }>('SELECT value FROM documents WHERE scope = ? AND key = ?'),
    putDocument: db.prepare<[string, string, string]>('INSERT INTO documents (scope, key, value) VALUES (?, ?, ?) ON CONFLICT (scope, key) DO UPDATE SET value = excluded.value'),
    deleteDocument: db.prepare<[string, string]>('DELETE FROM documents WHERE scope = ? AND key = ?'),
    listDocuments: db.prepare<[string], StoredDocument>('SELECT key, value FROM documents WHERE scope = ? ORDER BY key'),
  };
}


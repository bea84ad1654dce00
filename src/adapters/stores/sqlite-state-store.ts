import { chmodSync, closeSync, existsSync, mkdirSync, openSync } from 'node:fs';
import { dirname, join } from 'node:path';
import Database from 'better-sqlite3';
import type { ControlPlane } from '../../api/control-plane.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../domain/machine.ts';
import { applySpecTo, deriveControlPlane, patchControlPlane, patchMachine } from '../../domain/record-writes.ts';
import {
  DocumentConflictError,
  FencedOutError,
  type AppliedSpec,
  type DocumentCondition,
  type LeaseHolder,
  type LeaseRecord,
  type ResourceClaim,
  type SpecWatch,
  type StateStore,
  type StoredDocument,
  type StoreWrite,
  type WriterLease,
} from '../../ports/state-store.ts';
import { bootClock } from '../host/boot-clock.ts';
import { isProvenGone } from '../host/process-identity.ts';
import { CorruptStateError, decodeControlPlane, decodeEvent, decodeLease, decodeMachine } from './record-codec.ts';
import { MIGRATIONS, prepareStatements, SCHEMA_VERSION, type LeaseRow } from './sqlite-schema.ts';
import { watchSqliteSpecs } from './sqlite-spec-watch.ts';

export { CorruptStateError, SCHEMA_VERSION };

const FENCE_SCOPE = 'lease-fence';
const FENCE_KEY = 'last';

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
        const same = current?.token === holder.token;
        const acquiredAt = same ? current.acquiredAt : now;
        const fence = same && current.fence !== undefined ? current.fence : this.nextFence();
        this.writeLease({ ...holder, cluster, acquiredAt, renewedAt: now, stopRequested: false, fence });
        return true;
      }),
    );
  }

  /**
   * The next fencing number, in the caller's transaction. Kept as a document of its own scope (no
   * provider's scope is without a slash): a lease row goes with its release, the counter never does.
   */
  private nextFence(): number {
    const fence = Number(this.statements.getDocument.get(FENCE_SCOPE, FENCE_KEY)?.value ?? '0') + 1;
    this.statements.putDocument.run(FENCE_SCOPE, FENCE_KEY, String(fence));
    return fence;
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

  getDocument(scope: string, key: string): Promise<string | undefined> {
    return settle(() => this.statements.getDocument.get(scope, key)?.value);
  }

  putDocument(scope: string, key: string, value: string): Promise<void> {
    return settle(() => {
      this.statements.putDocument.run(scope, key, value);
    });
  }

  deleteDocument(scope: string, key: string): Promise<void> {
    return settle(() => {
      this.statements.deleteDocument.run(scope, key);
    });
  }

  /** One immediate transaction: the condition is read under the write lock it already holds. */
  putDocuments(scope: string, puts: readonly StoredDocument[], deletes: readonly string[], condition?: DocumentCondition): Promise<void> {
    return settle(() => {
      this.immediate(() => {
        if (condition !== undefined && this.statements.getDocument.get(scope, condition.key)?.value !== condition.value) throw new DocumentConflictError(scope, condition.key);
        for (const { key, value } of puts) this.statements.putDocument.run(scope, key, value);
        for (const key of deletes) this.statements.deleteDocument.run(scope, key);
      });
    });
  }

  listDocuments(scope: string): Promise<StoredDocument[]> {
    return settle(() => this.statements.listDocuments.all(scope));
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

import type { ControlPlane } from '../../api/control-plane.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../domain/machine.ts';
import { applySpecTo } from '../../domain/record-writes.ts';
import {
  DocumentConflictError,
  FencedOutError,
  leaseIsFree,
  type AppliedSpec,
  type DocumentCondition,
  type LeaseHolder,
  type LeaseRecord,
  type ResourceClaim,
  type StoredDocument,
  type SpecWatch,
  type StateStore,
  type StoreWrite,
  type WriterLease,
} from '../../ports/state-store.ts';
import { isProvenGone } from '../host/process-identity.ts';
import { applyBatch, copy } from './record-batch.ts';

/**
 * The StateStore in memory, for tests and the simulator. Same semantics as the SQLite store (the shared
 * StateStore contract runs against both), and cheap enough for simulations of thousands of passes:
 * stored values are never mutated, so a commit copies only what it changes.
 */

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export interface MemoryStateStoreOptions {
  /** Whether a lease's holder may still run (default: unless /proc proves it gone, src/adapters/host/process-identity.ts). */
  isHolderAlive?: (holder: LeaseHolder) => boolean;
}

const unlessProvenGone = (holder: LeaseHolder): boolean => !isProvenGone(holder.identity);

export class MemoryStateStore implements StateStore {
  private controlPlanes = new Map<string, ControlPlaneRecord>();
  private machines = new Map<string, Map<string, MachineRecord>>();
  /** Append-only between deletions; elements are never changed in place. */
  private events: EventRecord[] = [];
  private eventSeq = 0;
  private leases = new Map<string, LeaseRecord>();
  /** The last fencing number given (LeaseRecord.fence): never reused, whatever cluster. */
  private lastFence = 0;
  /** pool -> key -> owner. */
  private claims = new Map<string, Map<string, string>>();
  private readonly documents = new Map<string, Map<string, string>>();
  private watchers = new Set<(cluster: string) => void>();
  private readonly isHolderAlive: (holder: LeaseHolder) => boolean;

  constructor(options: MemoryStateStoreOptions = {}) {
    this.isHolderAlive = options.isHolderAlive ?? unlessProvenGone;
  }

  getControlPlane(name: string): Promise<ControlPlaneRecord | undefined> {
    const record = this.controlPlanes.get(name);
    return Promise.resolve(record && copy(record));
  }

  listControlPlanes(): Promise<ControlPlaneRecord[]> {
    return Promise.resolve([...this.controlPlanes.values()].sort((a, b) => a.createdAt - b.createdAt || compareText(a.name, b.name)).map(copy));
  }

  listMachines(cluster: string): Promise<MachineRecord[]> {
    // Not through inspect(): its event filter is a scan of every cluster's events, too slow for a
    // simulated controller with thousands of clusters observing each pass.
    return Promise.resolve([...(this.machines.get(cluster)?.values() ?? [])].sort((a, b) => a.ordinal - b.ordinal || compareText(a.name, b.name)).map(copy));
  }

  getMachine(cluster: string, name: string): Promise<MachineRecord | undefined> {
    const record = this.machines.get(cluster)?.get(name);
    return Promise.resolve(record && copy(record));
  }

  listEvents(cluster: string, afterSeq = 0): Promise<EventRecord[]> {
    return Promise.resolve(this.events.filter((event) => event.cluster === cluster && (event.seq ?? 0) > afterSeq).map(copy));
  }

  /** The cluster's control plane record right now, synchronously: inspect() without copying every event. */
  inspectControlPlane(cluster: string): ControlPlaneRecord | undefined {
    const record = this.controlPlanes.get(cluster);
    return record && copy(record);
  }

  /**
   * The cluster's records right now, synchronously: for the simulator's checks, which run inside a
   * pass (the port itself is asynchronous, as a networked store must be).
   */
  inspect(cluster: string): { controlPlane: ControlPlaneRecord | undefined; machines: MachineRecord[]; events: EventRecord[] } {
    return {
      controlPlane: this.inspectControlPlane(cluster),
      machines: [...(this.machines.get(cluster)?.values() ?? [])].sort((a, b) => a.ordinal - b.ordinal || compareText(a.name, b.name)).map(copy),
      events: this.events.filter((event) => event.cluster === cluster).map(copy),
    };
  }

  applySpec(manifest: ControlPlane, now: number): Promise<AppliedSpec> {
    const applied = applySpecTo(this.controlPlanes.get(manifest.metadata.name), manifest, now);
    if (applied.changed) {
      this.controlPlanes.set(applied.record.name, copy(applied.record));
      this.notify(applied.record.name);
    }
    return Promise.resolve({ ...applied, record: copy(applied.record) });
  }

  commit(lease: WriterLease, writes: readonly StoreWrite[]): Promise<void> {
    try {
      this.assertHolds(lease);
      // Everything is computed before anything is stored: a refused write leaves no partial batch.
      const { controlPlane: cp, machines, events } = applyBatch(lease.cluster, this.controlPlanes.get(lease.cluster), this.machines.get(lease.cluster) ?? new Map(), writes);
      if (cp) this.controlPlanes.set(lease.cluster, cp);
      if (machines.size === 0) this.machines.delete(lease.cluster);
      else this.machines.set(lease.cluster, machines);
      for (const event of events) this.events.push({ ...event, seq: ++this.eventSeq });
      return Promise.resolve();
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
  }

  deleteControlPlane(lease: WriterLease): Promise<void> {
    try {
      this.assertHolds(lease);
    } catch (error) {
      return Promise.reject(error instanceof Error ? error : new Error(String(error)));
    }
    this.controlPlanes.delete(lease.cluster);
    this.machines.delete(lease.cluster);
    this.events = this.events.filter((event) => event.cluster !== lease.cluster);
    this.leases.delete(lease.cluster);
    this.notify(lease.cluster);
    return Promise.resolve();
  }

  acquireLease(cluster: string, holder: LeaseHolder, now: number, options: { force?: boolean } = {}): Promise<boolean> {
    const current = this.leases.get(cluster);
    if (current && current.token !== holder.token && !this.isFree(current, now) && options.force !== true) return Promise.resolve(false);
    const same = current?.token === holder.token;
    const acquiredAt = same ? current.acquiredAt : now;
    const fence = same && current.fence !== undefined ? current.fence : ++this.lastFence;
    this.leases.set(cluster, { ...holder, cluster, acquiredAt, renewedAt: now, stopRequested: false, fence });
    return Promise.resolve(true);
  }

  renewLease(cluster: string, token: string, now: number): Promise<LeaseRecord | undefined> {
    const current = this.leases.get(cluster);
    if (current?.token !== token) return Promise.resolve(undefined);
    const renewed = { ...current, renewedAt: now };
    this.leases.set(cluster, renewed);
    return Promise.resolve({ ...renewed });
  }

  releaseLease(cluster: string, token: string): Promise<void> {
    if (this.leases.get(cluster)?.token === token) this.leases.delete(cluster);
    return Promise.resolve();
  }

  getLease(cluster: string): Promise<LeaseRecord | undefined> {
    const lease = this.leases.get(cluster);
    return Promise.resolve(lease && { ...lease });
  }

  requestStop(cluster: string, token: string): Promise<void> {
    const current = this.leases.get(cluster);
    if (current?.token === token) this.leases.set(cluster, { ...current, stopRequested: true });
    return Promise.resolve();
  }

  watchSpecs(onChange: (cluster: string) => void): SpecWatch {
    // Calls come from a later task, never from inside the caller's own applySpec: a callback that
    // reads or writes the store must not run in the middle of a store call.
    const watcher = (cluster: string) => {
      setImmediate(() => {
        if (this.watchers.has(watcher)) onChange(cluster);
      });
    };
    this.watchers.add(watcher);
    for (const name of this.controlPlanes.keys()) watcher(name);
    return {
      close: () => {
        this.watchers.delete(watcher);
        return Promise.resolve();
      },
    };
  }

  claim(pool: string, key: string, owner: string): Promise<boolean> {
    const claims = this.claims.get(pool) ?? new Map<string, string>();
    this.claims.set(pool, claims);
    const current = claims.get(key);
    if (current === undefined) claims.set(key, owner);
    return Promise.resolve((current ?? owner) === owner);
  }

  releaseClaim(pool: string, key: string, owner: string): Promise<void> {
    const claims = this.claims.get(pool);
    if (claims?.get(key) === owner) claims.delete(key);
    return Promise.resolve();
  }

  listClaims(pool: string): Promise<ResourceClaim[]> {
    const claims = [...(this.claims.get(pool) ?? new Map<string, string>()).entries()];
    return Promise.resolve(claims.sort(([a], [b]) => compareText(a, b)).map(([key, owner]) => ({ pool, key, owner })));
  }

  getDocument(scope: string, key: string): Promise<string | undefined> {
    return Promise.resolve(this.documents.get(scope)?.get(key));
  }

  putDocument(scope: string, key: string, value: string): Promise<void> {
    const documents = this.documents.get(scope) ?? new Map<string, string>();
    this.documents.set(scope, documents);
    documents.set(key, value);
    return Promise.resolve();
  }

  deleteDocument(scope: string, key: string): Promise<void> {
    this.documents.get(scope)?.delete(key);
    return Promise.resolve();
  }

  putDocuments(scope: string, puts: readonly StoredDocument[], deletes: readonly string[], condition?: DocumentCondition): Promise<void> {
    const documents = this.documents.get(scope) ?? new Map<string, string>();
    if (condition !== undefined && documents.get(condition.key) !== condition.value) return Promise.reject(new DocumentConflictError(scope, condition.key));
    this.documents.set(scope, documents);
    for (const { key, value } of puts) documents.set(key, value);
    for (const key of deletes) documents.delete(key);
    return Promise.resolve();
  }

  listDocuments(scope: string): Promise<StoredDocument[]> {
    const documents = [...(this.documents.get(scope) ?? new Map<string, string>()).entries()];
    return Promise.resolve(documents.sort(([a], [b]) => compareText(a, b)).map(([key, value]) => ({ key, value })));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  private notify(cluster: string): void {
    for (const watcher of this.watchers) watcher(cluster);
  }

  private isFree(lease: LeaseRecord, now: number): boolean {
    // One process, one clock: its callers' `now` is the store's own.
    return leaseIsFree(lease, now, this.isHolderAlive);
  }

  private assertHolds(lease: WriterLease): void {
    if (this.leases.get(lease.cluster)?.token !== lease.token) throw new FencedOutError(lease.cluster);
  }
}

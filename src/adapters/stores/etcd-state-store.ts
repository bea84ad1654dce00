import type { Etcd3, ICompare, IKeyValue, IRequestOp, ITxnResponse } from 'etcd3';
import type { ControlPlane } from '../../api/control-plane.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../domain/machine.ts';
import { applySpecTo } from '../../domain/record-writes.ts';
import {
  DocumentConflictError,
  FencedOutError,
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
import { batchTxn, decodeClusterRead, documentIs, leaseCompare, put, readOps, remove, unchanged } from './etcd-commit.ts';
import { watchEtcdSpecs } from './etcd-spec-watch.ts';
import { EtcdEndpoints, EtcdKeys, prefixEnd, type EtcdStoreConnection } from './etcd-store-client.ts';
import { decodeControlPlane, decodeEvent, decodeLease, decodeMachine } from './record-codec.ts';

export interface EtcdStateStoreOptions extends EtcdStoreConnection {
  /** Where the records live (default `/fastplane/`); several fastplane installations may share one etcd. */
  prefix?: string;
  /** Whether a lease's holder may still run (default: unless /proc proves it gone, src/adapters/host/process-identity.ts). */
  isHolderAlive?: (holder: LeaseHolder) => boolean;
}

/**
 * Optimistic writes read, decide and commit only if nothing they read moved. Losing that race is
 * normal (a lease renewal, or several actions of one pass committing at once) and costs a re-read;
 * only a storm of it, which would mean something rewrites the records in a loop, gives up.
 */
const MAX_ATTEMPTS = 50;

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** The TTL of the etcd lease behind a cluster lease: the holder's, rounded up to whole seconds (etcd's unit). */
function ttlSeconds(ttlMs: number): number {
  return Math.max(1, Math.ceil(ttlMs / 1000));
}

/** etcd's answer to a put under an etcd lease that expired since it was read. */
const LEASE_NOT_FOUND = /lease not found/i;

/**
 * The StateStore in etcd, for fastplane processes on several hosts (or one management cluster). Records
 * are JSON values under a key prefix (layout in etcd-store-client.ts); every fenced write is one
 * transaction conditional on the writer's lease key (etcd-commit.ts). A cluster's lease key is attached
 * to an etcd lease with the holder's TTL, granted when the lease is taken and kept alive by each
 * renewal: etcd expires it, and deletes the key, on its own clock. The lease is free exactly when the
 * key is gone; no process compares its clock with the times another wrote in the record.
 */
export class EtcdStateStore implements StateStore {
  private readonly etcd: EtcdEndpoints;
  private readonly keys: EtcdKeys;
  private readonly isHolderAlive: (holder: LeaseHolder) => boolean;
  private readonly watches = new Set<SpecWatch>();

  constructor(options: EtcdStateStoreOptions) {
    this.etcd = new EtcdEndpoints(options);
    this.keys = new EtcdKeys(options.prefix ?? '/fastplane/');
    this.isHolderAlive = options.isHolderAlive ?? ((holder) => !isProvenGone(holder.identity));
  }

  /** Where the store is, for messages. */
  describe(): string {
    return `etcd ${this.etcd.endpoints.join(',')} (prefix ${this.keys.prefix})`;
  }

  async getControlPlane(name: string): Promise<ControlPlaneRecord | undefined> {
    const kv = await this.get(this.keys.controlPlane(name));
    return kv && decodeControlPlane('control-planes', kv.key.toString(), kv.value.toString());
  }

  async listControlPlanes(): Promise<ControlPlaneRecord[]> {
    const kvs = await this.range(this.keys.controlPlanes());
    const records = kvs.map((kv) => decodeControlPlane('control-planes', kv.key.toString(), kv.value.toString()));
    return records.sort((a, b) => a.createdAt - b.createdAt || compareText(a.name, b.name));
  }

  async listMachines(cluster: string): Promise<MachineRecord[]> {
    const kvs = await this.range(this.keys.machines(cluster));
    const records = kvs.map((kv) => decodeMachine('machines', kv.key.toString(), kv.value.toString()));
    return records.sort((a, b) => a.ordinal - b.ordinal || compareText(a.name, b.name));
  }

  async getMachine(cluster: string, name: string): Promise<MachineRecord | undefined> {
    const kv = await this.get(this.keys.machine(cluster, name));
    return kv && decodeMachine('machines', kv.key.toString(), kv.value.toString());
  }

  async listEvents(cluster: string, afterSeq = 0): Promise<EventRecord[]> {
    const prefix = Buffer.from(this.keys.events(cluster));
    const from = Buffer.from(this.keys.event(cluster, afterSeq + 1));
    const response = await this.etcd.read((client) => client.kv.range({ key: from, range_end: prefixEnd(prefix) }));
    return response.kvs.map((kv) => {
      const key = kv.key.toString();
      return { ...decodeEvent('events', key, kv.value.toString()), seq: this.keys.seqOf(key) };
    });
  }

  async applySpec(manifest: ControlPlane, now: number): Promise<AppliedSpec> {
    const key = this.keys.controlPlane(manifest.metadata.name);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const kv = await this.get(key);
      const existing = kv && decodeControlPlane('control-planes', key, kv.value.toString());
      const applied = applySpecTo(existing, manifest, now);
      if (!applied.changed) return applied;
      if ((await this.txn([unchanged(key, kv)], [put(key, applied.record)])).succeeded) return applied;
    }
    throw this.contended(`store the spec of ${manifest.metadata.name}`);
  }

  async commit(lease: WriterLease, writes: readonly StoreWrite[]): Promise<void> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const read = await this.readCluster(lease.cluster);
      const { compare, success } = batchTxn(this.keys, lease.cluster, lease.token, read, writes);
      if (success.length === 0) {
        // Nothing to write (every write a no-op): the lease check above is the whole commit.
        return;
      }
      if ((await this.txn(compare, success)).succeeded) return;
    }
    throw this.contended(`commit to ${lease.cluster}`);
  }

  async deleteControlPlane(lease: WriterLease): Promise<void> {
    const cluster = lease.cluster;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const kv = await this.get(this.keys.lease(cluster));
      const current = kv && decodeLease('leases', kv.key.toString(), kv.value.toString());
      if (!kv || current?.token !== lease.token) throw new FencedOutError(cluster);
      const machines = Buffer.from(this.keys.machines(cluster));
      const events = Buffer.from(this.keys.events(cluster));
      const deleted = await this.txn(leaseCompare(this.keys.lease(cluster), kv), [
        remove(this.keys.controlPlane(cluster)),
        { request_delete_range: { key: machines, range_end: prefixEnd(machines) } },
        { request_delete_range: { key: events, range_end: prefixEnd(events) } },
        remove(this.keys.lease(cluster)),
      ]);
      if (deleted.succeeded) {
        this.revoke(kv.lease);
        return;
      }
    }
    throw this.contended(`delete ${cluster}`);
  }

  async acquireLease(cluster: string, holder: LeaseHolder, now: number, options: { force?: boolean } = {}): Promise<boolean> {
    const key = this.keys.lease(cluster);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { kv, revision } = await this.getWithRevision(key);
      const current = kv && decodeLease('leases', key, kv.value.toString());
      // Present means unexpired: etcd deleted the key of a holder that stopped renewing.
      const taken = current !== undefined && current.token !== holder.token && this.isHolderAlive(current);
      if (taken && options.force !== true) return false;
      const same = current?.token === holder.token;
      const acquiredAt = same ? current.acquiredAt : now;
      // The read is linearizable: every fence given before was at most the revision it was put at, so
      // one past the revision read is higher than all of them.
      const fence = same && current.fence !== undefined ? current.fence : revision + 1;
      const record: LeaseRecord = { ...holder, cluster, acquiredAt, renewedAt: now, stopRequested: false, fence };
      if (await this.putLease(key, kv, record)) return true;
    }
    throw this.contended(`acquire the lease of ${cluster}`);
  }

  async renewLease(cluster: string, token: string, now: number): Promise<LeaseRecord | undefined> {
    const key = this.keys.lease(cluster);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const kv = await this.get(key);
      const current = kv && decodeLease('leases', key, kv.value.toString());
      if (!kv || current?.token !== token) return undefined;
      // Kept alive before the record is rewritten: the TTL runs again from no earlier than this call.
      if (!(await this.etcd.keepAlive(kv.lease))) return undefined;
      const renewed = { ...current, renewedAt: now };
      const written = await this.txn([unchanged(key, kv)], [put(key, renewed, kv.lease)]).catch((error: unknown) => {
        // Expired between the keep-alive and the write: the next read says so.
        if (error instanceof Error && LEASE_NOT_FOUND.test(error.message)) return undefined;
        throw error;
      });
      if (written?.succeeded === true) return renewed;
    }
    throw this.contended(`renew the lease of ${cluster}`);
  }

  async releaseLease(cluster: string, token: string): Promise<void> {
    const key = this.keys.lease(cluster);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const kv = await this.get(key);
      if (!kv || decodeLease('leases', key, kv.value.toString()).token !== token) return;
      if ((await this.txn(leaseCompare(key, kv), [remove(key)])).succeeded) {
        this.revoke(kv.lease);
        return;
      }
    }
    throw this.contended(`release the lease of ${cluster}`);
  }

  async getLease(cluster: string): Promise<LeaseRecord | undefined> {
    const key = this.keys.lease(cluster);
    const kv = await this.get(key);
    return kv && decodeLease('leases', key, kv.value.toString());
  }

  async requestStop(cluster: string, token: string): Promise<void> {
    const key = this.keys.lease(cluster);
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const kv = await this.get(key);
      const current = kv && decodeLease('leases', key, kv.value.toString());
      if (!kv || current?.token !== token) return;
      // The same etcd lease: asking the holder to stop must not extend its life.
      const stopping = await this.txn(leaseCompare(key, kv), [put(key, { ...current, stopRequested: true }, kv.lease)]).catch((error: unknown) => {
        // The holder's etcd lease ran out between the read and the write: there is nobody to stop.
        if (error instanceof Error && LEASE_NOT_FOUND.test(error.message)) return undefined;
        throw error;
      });
      if (stopping === undefined || stopping.succeeded) return;
    }
    throw this.contended(`request ${cluster} to stop`);
  }

  watchSpecs(onChange: (cluster: string) => void): SpecWatch {
    const watch = watchEtcdSpecs(this.etcd, this.keys, onChange);
    this.watches.add(watch);
    return {
      close: async () => {
        this.watches.delete(watch);
        await watch.close();
      },
    };
  }

  async claim(pool: string, key: string, owner: string): Promise<boolean> {
    const claimKey = this.keys.claim(pool, key);
    const response = await this.txn([unchanged(claimKey, undefined)], [put(claimKey, { pool, key, owner })], [{ request_range: { key: Buffer.from(claimKey) } }]);
    if (response.succeeded) return true;
    const kv = response.responses[0]?.response_range.kvs[0];
    return kv !== undefined && this.claimOf(kv).owner === owner;
  }

  async releaseClaim(pool: string, key: string, owner: string): Promise<void> {
    const claimKey = this.keys.claim(pool, key);
    // Only while the stored value names this owner, compared inside the transaction.
    const value = Buffer.from(JSON.stringify({ pool, key, owner }));
    await this.txn([{ key: Buffer.from(claimKey), target: 'Value', result: 'Equal', value }], [remove(claimKey)]);
  }

  async listClaims(pool: string): Promise<ResourceClaim[]> {
    const claims = (await this.range(this.keys.claims(pool))).map((kv) => this.claimOf(kv));
    return claims.sort((a, b) => compareText(a.key, b.key));
  }

  async getDocument(scope: string, key: string): Promise<string | undefined> {
    return (await this.get(this.keys.document(scope, key)))?.value.toString();
  }

  async putDocument(scope: string, key: string, value: string): Promise<void> {
    await this.etcd.write((client) => client.kv.put({ key: Buffer.from(this.keys.document(scope, key)), value: Buffer.from(value) }));
  }

  async deleteDocument(scope: string, key: string): Promise<void> {
    await this.etcd.write((client) => client.kv.deleteRange({ key: Buffer.from(this.keys.document(scope, key)) }));
  }

  /**
   * One etcd transaction (etcd caps its operations, 128 by default: more fail whole), the condition
   * among its compares. etcd fails a Value compare on a missing key, so absence is compared as
   * version 0 (docs/etcd-behaviour.md).
   */
  async putDocuments(scope: string, puts: readonly StoredDocument[], deletes: readonly string[], condition?: DocumentCondition): Promise<void> {
    const ops: IRequestOp[] = [
      ...puts.map(({ key, value }) => ({ request_put: { key: Buffer.from(this.keys.document(scope, key)), value: Buffer.from(value) } })),
      ...deletes.map((key) => remove(this.keys.document(scope, key))),
    ];
    const compare: ICompare[] = condition === undefined ? [] : [documentIs(this.keys.document(scope, condition.key), condition.value)];
    const response = await this.txn(compare, ops);
    if (!response.succeeded && condition !== undefined) throw new DocumentConflictError(scope, condition.key);
  }

  async listDocuments(scope: string): Promise<StoredDocument[]> {
    const prefix = this.keys.documents(scope);
    const documents = (await this.range(prefix)).map((kv) => ({ key: decodeURIComponent(kv.key.toString().slice(prefix.length)), value: kv.value.toString() }));
    return documents.sort((a, b) => compareText(a.key, b.key));
  }

  async close(): Promise<void> {
    await Promise.all([...this.watches].map((watch) => watch.close()));
    this.watches.clear();
    this.etcd.close();
  }

  private claimOf(kv: IKeyValue): ResourceClaim {
    const text = kv.value.toString();
    try {
      const value = JSON.parse(text) as Partial<ResourceClaim>;
      if (typeof value.pool === 'string' && typeof value.key === 'string' && typeof value.owner === 'string') return { pool: value.pool, key: value.key, owner: value.owner };
    } catch {
      // Reported below with the key.
    }
    throw new Error(`state store: claim ${kv.key.toString()} is corrupt: ${text.slice(0, 80)}`);
  }

  /** Writes a new holder's record, if the key is as read, under a newly granted etcd lease of its TTL. */
  private async putLease(key: string, kv: IKeyValue | undefined, record: LeaseRecord): Promise<boolean> {
    const granted = await this.etcd.write((client) => client.leaseClient.leaseGrant({ TTL: ttlSeconds(record.ttlMs) }));
    const response = await this.txn([unchanged(key, kv)], [put(key, record, granted.ID)]).catch((error: unknown) => {
      this.revoke(granted.ID);
      throw error;
    });
    // The old etcd lease holds no key any more (or the new one never got one): let it go.
    this.revoke(response.succeeded ? kv?.lease : granted.ID);
    return response.succeeded;
  }

  /** Best effort, not awaited: an etcd lease left behind expires with its TTL anyway. */
  private revoke(id: string | undefined): void {
    if (id === undefined || id === '0') return;
    void this.etcd.write((client) => client.leaseClient.leaseRevoke({ ID: id })).catch(() => undefined);
  }

  private async readCluster(cluster: string) {
    const response = await this.etcd.read((client) => client.kv.txn({ success: readOps(this.keys, cluster) }));
    return decodeClusterRead(response.responses.map((op) => op.response_range.kvs));
  }

  private async get(key: string): Promise<IKeyValue | undefined> {
    const response = await this.etcd.read((client) => client.kv.range({ key: Buffer.from(key) }));
    return response.kvs[0];
  }

  /** The key and the store's revision when it was read. */
  private async getWithRevision(key: string): Promise<{ kv: IKeyValue | undefined; revision: number }> {
    const response = await this.etcd.read((client) => client.kv.range({ key: Buffer.from(key) }));
    return { kv: response.kvs[0], revision: Number(response.header.revision) };
  }

  private async range(prefix: string): Promise<IKeyValue[]> {
    const key = Buffer.from(prefix);
    const response = await this.etcd.read((client) => client.kv.range({ key, range_end: prefixEnd(key) }));
    return response.kvs;
  }

  private txn(compare: ICompare[], success: IRequestOp[], failure: IRequestOp[] = []): Promise<ITxnResponse> {
    return this.etcd.write((client: Etcd3) => client.kv.txn({ compare, success, failure }));
  }

  private contended(what: string): Error {
    return new Error(`etcd store: could not ${what}: the records kept changing under ${String(MAX_ATTEMPTS)} attempts`);
  }
}

import type { V1ConfigMap } from '@kubernetes/client-node';
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
  type SpecWatch,
  type StateStore,
  type StoredDocument,
  type StoreWrite,
  type WriterLease,
} from '../../ports/state-store.ts';
import { isProvenGone } from '../host/process-identity.ts';
import { CLUSTER_RECORD, decodeClusterObject, emptyRecords, encodeClusterObject, type ClusterRecords } from './kubernetes-cluster-object.ts';
import { DataObjects } from './kubernetes-data-objects.ts';
import { KubernetesLeases, MAX_ATTEMPTS, contended } from './kubernetes-leases.ts';
import { watchKubernetesSpecs } from './kubernetes-spec-watch.ts';
import { KubernetesApi, RECORD_LABEL, deleteIfUnchanged, objectName, type KubernetesStoreConnection } from './kubernetes-store-client.ts';
import { applyBatch } from './record-batch.ts';

export interface KubernetesStateStoreOptions extends KubernetesStoreConnection {
  /** Whether a lease's holder may still run (default: unless /proc proves it gone, src/adapters/host/process-identity.ts). */
  isHolderAlive?: (holder: LeaseHolder) => boolean;
  /** The clock a candidate judges a Lease's expiry on (default: this process's monotonic clock, in ms). */
  clock?: () => number;
  /** Runs inside every commit, between the check of the writer's Lease and the read of the records (tests race a takeover there). */
  afterLeaseCheck?: (cluster: string) => Promise<void>;
}

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

interface ClusterRead {
  object: V1ConfigMap | undefined;
  records: ClusterRecords;
}

/**
 * The StateStore in a Kubernetes API server, where Cluster API keeps its records: in one namespace,
 * per control plane one ConfigMap with its records (kubernetes-cluster-object.ts) and one Lease
 * (kubernetes-leases.ts); per claim pool a ConfigMap, per document scope a Secret
 * (kubernetes-data-objects.ts). The API server has no transaction over two objects, so fencing is done
 * in the records' own object: a commit checks the writer's Lease, then updates the cluster's ConfigMap
 * under the resourceVersion it read, and only if the fence recorded there is not above the writer's. A
 * new holder raises that fence before it acts, so a deposed holder's write is refused even when it
 * read the records after the takeover: its fence is lower.
 */
export class KubernetesStateStore implements StateStore {
  private readonly api: KubernetesApi;
  private readonly leases: KubernetesLeases;
  private readonly claims: DataObjects;
  private readonly documents: DataObjects;
  private readonly watches = new Set<SpecWatch>();
  private readonly afterLeaseCheck: (cluster: string) => Promise<void>;

  constructor(options: KubernetesStateStoreOptions) {
    this.api = new KubernetesApi(options);
    const isHolderAlive = options.isHolderAlive ?? ((holder: LeaseHolder) => !isProvenGone(holder.identity));
    this.leases = new KubernetesLeases(this.api, (cluster) => this.clusterObjectName(cluster), isHolderAlive, options.clock);
    this.claims = new DataObjects(this.api, 'configmap', 'claims');
    this.documents = new DataObjects(this.api, 'secret', 'documents');
    this.afterLeaseCheck = options.afterLeaseCheck ?? (() => Promise.resolve());
  }

  /** Where the store is, for messages. */
  describe(): string {
    return `kubernetes ${this.api.server} (namespace ${this.api.namespace})`;
  }

  async getControlPlane(name: string): Promise<ControlPlaneRecord | undefined> {
    return (await this.readCluster(name)).records.controlPlane;
  }

  async listControlPlanes(): Promise<ControlPlaneRecord[]> {
    const listing = await this.api.call('list configmaps', () => this.api.core.listNamespacedConfigMap({ namespace: this.api.namespace, labelSelector: `${RECORD_LABEL}=${CLUSTER_RECORD}` }));
    const records = listing.items.flatMap((object) => decodeClusterObject(object).controlPlane ?? []);
    return records.sort((a, b) => a.createdAt - b.createdAt || compareText(a.name, b.name));
  }

  async listMachines(cluster: string): Promise<MachineRecord[]> {
    const machines = [...(await this.readCluster(cluster)).records.machines.values()];
    return machines.sort((a, b) => a.ordinal - b.ordinal || compareText(a.name, b.name));
  }

  async getMachine(cluster: string, name: string): Promise<MachineRecord | undefined> {
    return (await this.readCluster(cluster)).records.machines.get(name);
  }

  async listEvents(cluster: string, afterSeq = 0): Promise<EventRecord[]> {
    return (await this.readCluster(cluster)).records.events.filter((event) => (event.seq ?? 0) > afterSeq);
  }

  async applySpec(manifest: ControlPlane, now: number): Promise<AppliedSpec> {
    const cluster = manifest.metadata.name;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const read = await this.readCluster(cluster);
      const applied = applySpecTo(read.records.controlPlane, manifest, now);
      if (!applied.changed) return applied;
      if (await this.writeCluster(cluster, read, { ...read.records, controlPlane: applied.record })) return applied;
    }
    throw contended(`store the spec of ${cluster}`);
  }

  async commit(lease: WriterLease, writes: readonly StoreWrite[]): Promise<void> {
    const cluster = lease.cluster;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const fence = await this.fenceOf(lease);
      await this.afterLeaseCheck(cluster);
      const read = await this.readCluster(cluster);
      // A newer holder recorded a higher fence: this writer was deposed after its Lease check.
      if (read.records.fence > fence) throw new FencedOutError(cluster);
      const batch = applyBatch(cluster, read.records.controlPlane, read.records.machines, writes);
      let eventSeq = read.records.eventSeq;
      const events = [...read.records.events, ...batch.events.map((event) => ({ ...event, seq: ++eventSeq }))];
      const records: ClusterRecords = { controlPlane: batch.controlPlane, machines: batch.machines, events, eventSeq, fence };
      // Nothing to write (every write a no-op): the fence checks above are the whole commit.
      if (this.sameData(cluster, read.records, records)) return;
      if (await this.writeCluster(cluster, read, records)) return;
    }
    throw contended(`commit to ${cluster}`);
  }

  async deleteControlPlane(lease: WriterLease): Promise<void> {
    const cluster = lease.cluster;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const held = await this.leases.read(cluster);
      if (held.record?.token !== lease.token || held.object === undefined) throw new FencedOutError(cluster);
      const read = await this.readCluster(cluster);
      if (read.records.fence > (held.record.fence ?? 0)) throw new FencedOutError(cluster);
      if (read.object !== undefined && !(await this.removeCluster(cluster, read.object))) continue;
      if (await this.leases.remove(cluster, held.object)) return;
    }
    throw contended(`delete ${cluster}`);
  }

  async acquireLease(cluster: string, holder: LeaseHolder, now: number, options: { force?: boolean } = {}): Promise<boolean> {
    const record = await this.leases.acquire(cluster, holder, now, options.force === true);
    if (record === undefined) return false;
    // Before the new holder acts: from here on, a deposed holder's commit is refused by the records themselves.
    await this.raiseFence(cluster, record.fence ?? 0);
    return true;
  }

  renewLease(cluster: string, token: string, now: number): Promise<LeaseRecord | undefined> {
    return this.leases.renew(cluster, token, now);
  }

  releaseLease(cluster: string, token: string): Promise<void> {
    return this.leases.release(cluster, token);
  }

  async getLease(cluster: string): Promise<LeaseRecord | undefined> {
    return (await this.leases.read(cluster)).record;
  }

  requestStop(cluster: string, token: string): Promise<void> {
    return this.leases.requestStop(cluster, token);
  }

  watchSpecs(onChange: (cluster: string) => void): SpecWatch {
    const watch = watchKubernetesSpecs(this.api, onChange);
    this.watches.add(watch);
    return {
      close: async () => {
        this.watches.delete(watch);
        await watch.close();
      },
    };
  }

  async claim(pool: string, key: string, owner: string): Promise<boolean> {
    let holds = false;
    await this.claims.update(this.poolName(pool), pool, (entries) => {
      const current = entries.get(key);
      holds = current === undefined || current === owner;
      if (current !== undefined) return false;
      entries.set(key, owner);
      return true;
    });
    return holds;
  }

  async releaseClaim(pool: string, key: string, owner: string): Promise<void> {
    await this.claims.update(this.poolName(pool), pool, (entries) => entries.get(key) === owner && entries.delete(key));
  }

  async listClaims(pool: string): Promise<ResourceClaim[]> {
    const entries = await this.claims.read(this.poolName(pool));
    return [...entries].map(([key, owner]) => ({ pool, key, owner })).sort((a, b) => compareText(a.key, b.key));
  }

  async getDocument(scope: string, key: string): Promise<string | undefined> {
    return (await this.documents.read(this.scopeName(scope))).get(key);
  }

  putDocument(scope: string, key: string, value: string): Promise<void> {
    return this.putDocuments(scope, [{ key, value }], []);
  }

  deleteDocument(scope: string, key: string): Promise<void> {
    return this.putDocuments(scope, [], [key]);
  }

  /**
   * One update of the scope's Secret: the API server stores all of it or, refusing it (too large, say),
   * none. The condition is checked on the Secret as read, and the update is sent under that read's
   * resourceVersion: a write in between makes the API server refuse it, and the retry reads again.
   */
  async putDocuments(scope: string, puts: readonly StoredDocument[], deletes: readonly string[], condition?: DocumentCondition): Promise<void> {
    const written = await this.documents.update(this.scopeName(scope), scope, (entries) => {
      if (condition !== undefined && entries.get(condition.key) !== condition.value) return false;
      for (const { key, value } of puts) entries.set(key, value);
      for (const key of deletes) entries.delete(key);
      return true;
    });
    if (!written && condition !== undefined) throw new DocumentConflictError(scope, condition.key);
  }

  async listDocuments(scope: string): Promise<StoredDocument[]> {
    const entries = await this.documents.read(this.scopeName(scope));
    return [...entries].map(([key, value]) => ({ key, value })).sort((a, b) => compareText(a.key, b.key));
  }

  async close(): Promise<void> {
    await Promise.all([...this.watches].map((watch) => watch.close()));
    this.watches.clear();
  }

  /** The writer's fence while its token holds the cluster's Lease; FencedOutError otherwise. */
  private async fenceOf(lease: WriterLease): Promise<number> {
    const { record } = await this.leases.read(lease.cluster);
    if (record?.token !== lease.token) throw new FencedOutError(lease.cluster);
    return record.fence ?? 0;
  }

  /** Records `fence` in the cluster's object unless a higher one is there (creating the object for a cluster with no spec yet). */
  private async raiseFence(cluster: string, fence: number): Promise<void> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const read = await this.readCluster(cluster);
      if (read.records.fence >= fence) return;
      if (await this.writeCluster(cluster, read, { ...read.records, fence })) return;
    }
    throw contended(`record the fence of ${cluster}`);
  }

  /** A readable name for a cluster's objects (its name is a DNS label), else one derived from it. */
  private clusterObjectName(cluster: string): string {
    return DNS_LABEL.test(cluster) ? `fastplane-cluster-${cluster}` : objectName('fastplane-cluster-x', cluster);
  }

  private poolName(pool: string): string {
    return objectName('fastplane-claims', pool);
  }

  private scopeName(scope: string): string {
    return objectName('fastplane-documents', scope);
  }

  private async readCluster(cluster: string): Promise<ClusterRead> {
    const name = this.clusterObjectName(cluster);
    const object = await this.api.read(`read configmap ${name}`, () => this.api.core.readNamespacedConfigMap({ name, namespace: this.api.namespace }));
    return { object, records: object === undefined ? emptyRecords() : decodeClusterObject(object) };
  }

  private sameData(cluster: string, before: ClusterRecords, after: ClusterRecords): boolean {
    const data = (records: ClusterRecords) => JSON.stringify(encodeClusterObject(cluster, '', '', records, undefined).data);
    return data(before) === data(after);
  }

  /** Creates the object, or replaces it under the resourceVersion read: false when another write came first. */
  private writeCluster(cluster: string, read: ClusterRead, records: ClusterRecords): Promise<boolean> {
    const name = this.clusterObjectName(cluster);
    const namespace = this.api.namespace;
    const resourceVersion = read.object?.metadata?.resourceVersion;
    const body = encodeClusterObject(cluster, name, namespace, records, resourceVersion);
    return resourceVersion === undefined
      ? this.api.write(`create configmap ${name}`, () => this.api.core.createNamespacedConfigMap({ namespace, body }))
      : this.api.write(`update configmap ${name}`, () => this.api.core.replaceNamespacedConfigMap({ name, namespace, body }));
  }

  private removeCluster(cluster: string, object: V1ConfigMap): Promise<boolean> {
    const name = this.clusterObjectName(cluster);
    return this.api.write(`delete configmap ${name}`, () => this.api.core.deleteNamespacedConfigMap({ name, namespace: this.api.namespace, body: deleteIfUnchanged(object.metadata?.resourceVersion) }));
  }
}

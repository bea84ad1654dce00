import { V1MicroTime, type V1ConfigMap, type V1Lease, type V1LeaseSpec } from '@kubernetes/client-node';
import type { LeaseHolder, LeaseRecord } from '../../ports/state-store.ts';
import { decodeLease } from './record-codec.ts';
import { MANAGED_BY, RECORD_LABEL, deleteIfUnchanged, type KubernetesApi, type Plain } from './kubernetes-store-client.ts';

/**
 * A cluster's lease as a `coordination.k8s.io/v1` Lease, with the semantics of client-go's leader
 * election (k8s.io/client-go/tools/leaderelection/leaderelection.go, tryAcquireOrRenew):
 * - `spec.holderIdentity` is the holder's token; empty once released (client-go's release also leaves
 *   the record with no holder); `leaseDurationSeconds` its TTL; `acquireTime` and `renewTime` are set
 *   by the holder; `leaseTransitions` counts changes of holder.
 * - Expiry is judged on the candidate's own clock: it notes when it last saw the lease's spec change,
 *   and takes the lease only once it has seen no change for `leaseDurationSeconds`. It never compares
 *   `renewTime`, written on another host's clock, with its own.
 * - Every write is an update carrying the resourceVersion read: of two candidates, one wins, the
 *   other gets 409 Conflict and reads again.
 * The holder's full record (LeaseRecord: holder, pid, process identity, stop request, fence) is kept
 * as JSON in an annotation. Its fence comes from one counter per namespace (a ConfigMap updated under
 * its resourceVersion), so a new holder's fence is higher than every fence given before, on any cluster.
 */

const RECORD_ANNOTATION = 'fastplane.dev/lease-record';
const FENCES = 'fastplane-fences';

/** Optimistic writes retry on conflict; only a storm of conflicts, a write loop somewhere, gives up. */
export const MAX_ATTEMPTS = 50;

/** A Lease's duration in whole seconds (its unit), at least the holder's TTL. */
function durationSeconds(ttlMs: number): number {
  return Math.max(1, Math.ceil(ttlMs / 1000));
}

/** When this process last saw a cluster's Lease spec change, on its monotonic clock. */
interface Observation {
  spec: string;
  at: number;
}

export interface LeaseRead {
  object: V1Lease | undefined;
  /** The holder's record; undefined when nobody holds the lease. */
  record: LeaseRecord | undefined;
}

export class KubernetesLeases {
  private readonly observed = new Map<string, Observation>();

  constructor(
    private readonly api: KubernetesApi,
    private readonly nameOf: (cluster: string) => string,
    private readonly isHolderAlive: (holder: LeaseHolder) => boolean,
    /** The observer's clock, in ms: monotonic, never the wall clock another host wrote. */
    private readonly clock: () => number = () => performance.now(),
  ) {}

  async read(cluster: string): Promise<LeaseRead> {
    const name = this.nameOf(cluster);
    const object = await this.api.read(`read lease ${name}`, () => this.api.coordination.readNamespacedLease({ name, namespace: this.api.namespace }));
    this.observe(cluster, object);
    return { object, record: object && recordOf(cluster, object) };
  }

  /** client-go's acquire: free, expired on this process's clock, held by a process proven gone, or forced. */
  async acquire(cluster: string, holder: LeaseHolder, now: number, force: boolean): Promise<LeaseRecord | undefined> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { object, record: current } = await this.read(cluster);
      const same = current?.token === holder.token;
      if (current !== undefined && !same && !force && this.isHolderAlive(current) && !this.expired(cluster, object)) return undefined;
      const fence = same && current.fence !== undefined ? current.fence : await this.nextFence();
      const record: LeaseRecord = { ...holder, cluster, acquiredAt: same ? current.acquiredAt : now, renewedAt: now, stopRequested: false, fence };
      const acquired = same ? object?.spec?.acquireTime : undefined;
      const spec: Plain<V1LeaseSpec> = {
        holderIdentity: holder.token,
        leaseDurationSeconds: durationSeconds(holder.ttlMs),
        acquireTime: acquired === undefined ? new V1MicroTime() : new V1MicroTime(acquired),
        renewTime: new V1MicroTime(),
        // As client-go counts them: a new holder of an existing Lease is one more transition.
        leaseTransitions: (object?.spec?.leaseTransitions ?? -1) + (same ? 0 : 1),
      };
      if (await this.write(cluster, object, record, spec)) return record;
    }
    throw contended(`acquire the lease of ${cluster}`);
  }

  /** The holder's renewal: a new renewTime (which restarts every observer's wait), only while its token holds it. */
  async renew(cluster: string, token: string, now: number): Promise<LeaseRecord | undefined> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { object, record: current } = await this.read(cluster);
      if (current?.token !== token || object === undefined) return undefined;
      const renewed = { ...current, renewedAt: now };
      if (await this.write(cluster, object, renewed, { ...plainSpec(object.spec), renewTime: new V1MicroTime() })) return renewed;
    }
    throw contended(`renew the lease of ${cluster}`);
  }

  /** As client-go releases: the Lease stays (its transitions with it), with no holder and a 1 s duration. */
  async release(cluster: string, token: string): Promise<void> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { object, record: current } = await this.read(cluster);
      if (current?.token !== token || object === undefined) return;
      const spec: Plain<V1LeaseSpec> = { leaseDurationSeconds: 1, leaseTransitions: object.spec?.leaseTransitions ?? 0, renewTime: new V1MicroTime(), acquireTime: new V1MicroTime() };
      if (await this.write(cluster, object, undefined, spec)) return;
    }
    throw contended(`release the lease of ${cluster}`);
  }

  /** Marks the record only: the spec (so every observer's wait) is left as it is. */
  async requestStop(cluster: string, token: string): Promise<void> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { object, record: current } = await this.read(cluster);
      if (current?.token !== token || object === undefined) return;
      if (await this.write(cluster, object, { ...current, stopRequested: true }, plainSpec(object.spec))) return;
    }
    throw contended(`request ${cluster} to stop`);
  }

  /** Deletes the Lease as read (a precondition on its resourceVersion): false when it changed meanwhile. */
  async remove(cluster: string, object: V1Lease): Promise<boolean> {
    const name = this.nameOf(cluster);
    const removed = await this.api.write(`delete lease ${name}`, () =>
      this.api.coordination.deleteNamespacedLease({ name, namespace: this.api.namespace, body: deleteIfUnchanged(object.metadata?.resourceVersion) }),
    );
    if (removed) this.observed.delete(cluster);
    return removed;
  }

  /** Notes the Lease's spec as this process sees it, and when it first saw that spec (client-go's observedTime). */
  private observe(cluster: string, object: Plain<V1Lease> | undefined): void {
    const spec = JSON.stringify(object?.spec ?? null);
    if (this.observed.get(cluster)?.spec !== spec) this.observed.set(cluster, { spec, at: this.clock() });
  }

  /** client-go's isLeaseValid, negated: no change seen for the Lease's duration, on this process's clock. */
  private expired(cluster: string, object: V1Lease | undefined): boolean {
    const seen = this.observed.get(cluster);
    const durationMs = (object?.spec?.leaseDurationSeconds ?? 0) * 1000;
    return seen !== undefined && this.clock() - seen.at >= durationMs;
  }

  private async write(cluster: string, object: V1Lease | undefined, record: LeaseRecord | undefined, spec: Plain<V1LeaseSpec>): Promise<boolean> {
    const name = this.nameOf(cluster);
    const namespace = this.api.namespace;
    const body: Plain<V1Lease> = {
      apiVersion: 'coordination.k8s.io/v1',
      kind: 'Lease',
      metadata: {
        name,
        namespace,
        labels: { ...MANAGED_BY, [RECORD_LABEL]: 'lease' },
        annotations: record === undefined ? {} : { [RECORD_ANNOTATION]: JSON.stringify(record) },
        ...(object?.metadata?.resourceVersion === undefined ? {} : { resourceVersion: object.metadata.resourceVersion }),
      },
      spec,
    };
    const written =
      object === undefined
        ? await this.api.write(`create lease ${name}`, () => this.api.coordination.createNamespacedLease({ namespace, body }))
        : await this.api.write(`update lease ${name}`, () => this.api.coordination.replaceNamespacedLease({ name, namespace, body }));
    // Its own write is a change this process saw: its wait, were it to lose the lease, starts now.
    if (written) this.observe(cluster, body);
    return written;
  }

  /** The next fencing number: one more than the last given in the namespace, stored under its resourceVersion. */
  private async nextFence(): Promise<number> {
    const namespace = this.api.namespace;
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = await this.api.read(`read configmap ${FENCES}`, () => this.api.core.readNamespacedConfigMap({ name: FENCES, namespace }));
      const fence = Number(current?.data?.last ?? '0') + 1;
      const body: Plain<V1ConfigMap> = {
        metadata: { name: FENCES, namespace, labels: { ...MANAGED_BY, [RECORD_LABEL]: 'fences' }, ...(current?.metadata?.resourceVersion === undefined ? {} : { resourceVersion: current.metadata.resourceVersion }) },
        data: { last: String(fence) },
      };
      const written = current
        ? await this.api.write(`update configmap ${FENCES}`, () => this.api.core.replaceNamespacedConfigMap({ name: FENCES, namespace, body }))
        : await this.api.write(`create configmap ${FENCES}`, () => this.api.core.createNamespacedConfigMap({ namespace, body }));
      if (written) return fence;
    }
    throw contended('take a fencing number');
  }
}

/**
 * The spec as read, to write back with a change: its times as MicroTimes again, which the API server
 * parses with six fraction digits only (the client's V1MicroTime writes them so; a Date has three).
 */
function plainSpec(spec: Plain<V1LeaseSpec> = {}): Plain<V1LeaseSpec> {
  const { acquireTime, renewTime, ...rest } = spec;
  return {
    ...rest,
    ...(acquireTime === undefined ? {} : { acquireTime: new V1MicroTime(acquireTime) }),
    ...(renewTime === undefined ? {} : { renewTime: new V1MicroTime(renewTime) }),
  };
}

function recordOf(cluster: string, object: V1Lease): LeaseRecord | undefined {
  const text = object.metadata?.annotations?.[RECORD_ANNOTATION];
  if (object.spec?.holderIdentity === undefined || object.spec.holderIdentity === '' || text === undefined) return undefined;
  const record = decodeLease('leases', `${object.metadata?.name ?? cluster} annotation ${RECORD_ANNOTATION}`, text);
  // The spec is what every client sees; a record that names another holder is stale.
  return record.token === object.spec.holderIdentity ? record : undefined;
}

export function contended(what: string): Error {
  return new Error(`kubernetes store: could not ${what}: the objects kept changing under ${String(MAX_ATTEMPTS)} attempts`);
}

import type { V1ConfigMap, V1Secret } from '@kubernetes/client-node';
import { MAX_ATTEMPTS, contended } from './kubernetes-leases.ts';
import { MANAGED_BY, NAME_ANNOTATION, RECORD_LABEL, dataKey, fromDataKey, type KubernetesApi, type Plain } from './kubernetes-store-client.ts';

/**
 * The key-value objects of the kubernetes store: claims (one ConfigMap per pool) and documents (one
 * Secret per scope, since they hold a cluster's CA and keys). One object per pool or scope makes each
 * change one update, all or nothing, under the resourceVersion read: a claim race has one winner, and
 * `putDocuments` is seen whole or not at all. Keys are stored as data keys (dataKey), values as given.
 */

export type DataKind = 'configmap' | 'secret';

/** Text by key, as stored (decoded from the object's data keys, and from base64 for a Secret). */
export type Entries = Map<string, string>;

interface Read {
  resourceVersion: string | undefined;
  entries: Entries;
}

export class DataObjects {
  constructor(
    private readonly api: KubernetesApi,
    private readonly kind: DataKind,
    /** The `fastplane.dev/record` label value: claims or documents. */
    private readonly record: string,
  ) {}

  async read(name: string): Promise<Entries> {
    return (await this.readVersioned(name)).entries;
  }

  /**
   * Reads, lets `change` edit the entries, and writes them back under the resourceVersion read,
   * again on a conflict. `change` returns false to write nothing; update returns what it last returned.
   */
  async update(name: string, owner: string, change: (entries: Entries) => boolean): Promise<boolean> {
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const current = await this.readVersioned(name);
      if (!change(current.entries)) return false;
      if (await this.write(name, owner, current, current.entries)) return true;
    }
    throw contended(`update ${this.kind} ${name}`);
  }

  private async readVersioned(name: string): Promise<Read> {
    const namespace = this.api.namespace;
    const object: V1ConfigMap | V1Secret | undefined =
      this.kind === 'secret'
        ? await this.api.read(`read secret ${name}`, () => this.api.core.readNamespacedSecret({ name, namespace }))
        : await this.api.read(`read configmap ${name}`, () => this.api.core.readNamespacedConfigMap({ name, namespace }));
    const entries: Entries = new Map();
    for (const [key, value] of Object.entries(object?.data ?? {})) entries.set(fromDataKey(key), this.kind === 'secret' ? Buffer.from(value, 'base64').toString('utf8') : value);
    return { resourceVersion: object?.metadata?.resourceVersion, entries };
  }

  private async write(name: string, owner: string, read: Read, entries: Entries): Promise<boolean> {
    const namespace = this.api.namespace;
    const metadata = {
      name,
      namespace,
      labels: { ...MANAGED_BY, [RECORD_LABEL]: this.record },
      annotations: { [NAME_ANNOTATION]: owner },
      ...(read.resourceVersion === undefined ? {} : { resourceVersion: read.resourceVersion }),
    };
    const data = Object.fromEntries([...entries].map(([key, value]) => [dataKey(key), this.kind === 'secret' ? Buffer.from(value).toString('base64') : value]));
    const exists = read.resourceVersion !== undefined;
    if (this.kind === 'secret') {
      const body: Plain<V1Secret> = { apiVersion: 'v1', kind: 'Secret', type: 'Opaque', metadata, data };
      return exists
        ? this.api.write(`update secret ${name}`, () => this.api.core.replaceNamespacedSecret({ name, namespace, body }))
        : this.api.write(`create secret ${name}`, () => this.api.core.createNamespacedSecret({ namespace, body }));
    }
    const body: Plain<V1ConfigMap> = { apiVersion: 'v1', kind: 'ConfigMap', metadata, data };
    return exists
      ? this.api.write(`update configmap ${name}`, () => this.api.core.replaceNamespacedConfigMap({ name, namespace, body }))
      : this.api.write(`create configmap ${name}`, () => this.api.core.createNamespacedConfigMap({ namespace, body }));
  }
}

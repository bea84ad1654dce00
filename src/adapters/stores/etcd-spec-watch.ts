import type { IKeyValue, Watcher } from 'etcd3';
import type { SpecWatch } from '../../ports/state-store.ts';
import { prefixEnd, type EtcdEndpoints, type EtcdKeys } from './etcd-store-client.ts';
import { decodeControlPlane } from './record-codec.ts';

/** How long a failed watch waits before it lists and watches again. */
const RESTART_MS = 1000;

/**
 * Watches the control-plane keys through an etcd watch. It lists them first (reporting each cluster),
 * then watches from the revision after the listing, so no change between the two is missed. Every put
 * of a control plane is seen, also a reconcile pass's patch of its status fields; only a new generation
 * (or a cluster created again, by its createdAt) or a deletion is reported. When the watch fails (etcd
 * compacted past it, say), it lists again and reports what changed meanwhile, then watches anew.
 */
export function watchEtcdSpecs(etcd: EtcdEndpoints, keys: EtcdKeys, onChange: (cluster: string) => void): SpecWatch {
  const client = etcd.streamClient();
  const known = new Map<string, string>();
  let closed = false;
  let watcher: Watcher | undefined;
  let retry: NodeJS.Timeout | undefined;
  // A function, not the variable: close() may run while start() awaits.
  const isClosed = (): boolean => closed;

  const versionOf = (kv: IKeyValue): string => {
    try {
      const record = decodeControlPlane('control-planes', kv.key.toString(), kv.value.toString());
      return `${String(record.generation)}@${String(record.createdAt)}`;
    } catch {
      // Unreadable: report it once per write, and let the reader's own error say what is wrong.
      return `unreadable@${kv.mod_revision}`;
    }
  };
  const report = (cluster: string, version: string | undefined): void => {
    if (closed || known.get(cluster) === version) return;
    if (version === undefined) known.delete(cluster);
    else known.set(cluster, version);
    onChange(cluster);
  };

  const start = async (): Promise<void> => {
    const prefix = Buffer.from(keys.controlPlanes());
    const listing = await etcd.read((c) => c.kv.range({ key: prefix, range_end: prefixEnd(prefix) }));
    const present = new Map(listing.kvs.map((kv) => [keys.clusterOf(kv.key.toString()), versionOf(kv)]));
    for (const cluster of new Set([...known.keys(), ...present.keys()])) report(cluster, present.get(cluster));
    if (isClosed()) return;
    const next = (BigInt(listing.header.revision) + 1n).toString();
    const created = await client.watch().prefix(prefix).startRevision(next).create();
    if (isClosed()) {
      await created.cancel();
      return;
    }
    watcher = created;
    created.on('put', (kv) => {
      report(keys.clusterOf(kv.key.toString()), versionOf(kv));
    });
    created.on('delete', (kv) => {
      report(keys.clusterOf(kv.key.toString()), undefined);
    });
    created.on('error', restart);
  };
  const begin = (): void => {
    start().catch(restart);
  };
  function restart(): void {
    if (closed) return;
    const old = watcher;
    watcher = undefined;
    old?.cancel().catch(() => undefined);
    clearTimeout(retry);
    retry = setTimeout(begin, RESTART_MS);
  }

  // start() reports only after its first await, never inside the caller's watchSpecs call.
  begin();
  return {
    close: async () => {
      if (closed) return;
      closed = true;
      clearTimeout(retry);
      await watcher?.cancel().catch(() => undefined);
      client.close();
    },
  };
}

import { Watch, type V1ConfigMap } from '@kubernetes/client-node';
import type { SpecWatch } from '../../ports/state-store.ts';
import { CLUSTER_RECORD, specVersionOf } from './kubernetes-cluster-object.ts';
import { NAME_ANNOTATION, RECORD_LABEL, type KubernetesApi } from './kubernetes-store-client.ts';

/** How long a failed or ended watch waits before it lists and watches again. */
const RESTART_MS = 500;
/**
 * The server ends each watch after this long (timeoutSeconds), and the store lists and watches again:
 * a watch that went silent without an error (a connection dropped on the way) lasts no longer.
 */
const WATCH_SECONDS = 60;

/**
 * Watches the clusters' ConfigMaps as client-go's reflector does (Kubernetes API concepts, "Efficient
 * detection of changes"): list, then watch from the list's resourceVersion, so nothing between the two
 * is missed. When the watch ends or fails, 410 Gone (the version was compacted away) included, it lists
 * again and reports what changed meanwhile. Every update of a cluster's records is seen; only a new
 * generation (or a cluster created again) or a deletion is reported.
 */
export function watchKubernetesSpecs(api: KubernetesApi, onChange: (cluster: string) => void): SpecWatch {
  const known = new Map<string, string>();
  const labelSelector = `${RECORD_LABEL}=${CLUSTER_RECORD}`;
  let closed = false;
  let abort: AbortController | undefined;
  let retry: NodeJS.Timeout | undefined;
  const isClosed = (): boolean => closed;

  const clusterOf = (object: V1ConfigMap): string | undefined => object.metadata?.annotations?.[NAME_ANNOTATION];
  const report = (cluster: string | undefined, version: string | undefined): void => {
    if (cluster === undefined || closed || known.get(cluster) === version) return;
    if (version === undefined) known.delete(cluster);
    else known.set(cluster, version);
    onChange(cluster);
  };

  const start = async (): Promise<void> => {
    const listing = await api.call('list configmaps', () => api.core.listNamespacedConfigMap({ namespace: api.namespace, labelSelector }));
    const present = new Map<string, string | undefined>();
    for (const object of listing.items) {
      const cluster = clusterOf(object);
      if (cluster !== undefined) present.set(cluster, specVersionOf(object));
    }
    for (const cluster of new Set([...known.keys(), ...present.keys()])) report(cluster, present.get(cluster));
    if (isClosed()) return;
    const watch = new Watch(api.config);
    const path = `/api/v1/namespaces/${api.namespace}/configmaps`;
    const query = { labelSelector, resourceVersion: listing.metadata?.resourceVersion, allowWatchBookmarks: true, timeoutSeconds: WATCH_SECONDS };
    abort = await watch.watch(
      path,
      query,
      (phase: string, object: V1ConfigMap) => {
        if (phase === 'ADDED' || phase === 'MODIFIED') report(clusterOf(object), specVersionOf(object));
        else if (phase === 'DELETED') report(clusterOf(object), undefined);
        // 410 Gone and the like: list again rather than wait for the server to end the watch.
        else if (phase === 'ERROR') restart();
      },
      () => {
        restart();
      },
    );
    if (isClosed()) abort.abort();
  };
  const begin = (): void => {
    start().catch(restart);
  };
  function restart(): void {
    if (closed) return;
    abort?.abort();
    abort = undefined;
    clearTimeout(retry);
    retry = setTimeout(begin, RESTART_MS);
  }

  // start() reports only after its first await, never inside the caller's watchSpecs call.
  begin();
  return {
    close: () => {
      closed = true;
      clearTimeout(retry);
      abort?.abort();
      return Promise.resolve();
    },
  };
}

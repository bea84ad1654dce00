import type { ControlPlane } from '../api/control-plane.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { underLease } from '../lease/under-lease.ts';
import { leaseOptions } from './lease.ts';
import type { ClusterPorts, Note, Runtime } from './runtime.ts';

/** Stops every member of a control plane by PID and deletes its machines and records, under the lease. */
export async function destroyControlPlane(ports: Pick<ClusterPorts, 'cluster' | 'provider' | 'store'>, writer: FencedWriter): Promise<void> {
  await writer.verify();
  await ports.provider.destroyCluster(ports.cluster, writer.fence);
  await ports.store.deleteControlPlane(writer.lease);
}

/**
 * Deletes a control plane under its lease, like any writer: a live holder is asked to stop and given
 * `waitMs` to finish its in-flight actions; with `force` it is then fenced out (its next write fails).
 * False when the holder did not stop and `force` was not given.
 */
export async function destroyUnderLease(runtime: Runtime, manifest: ControlPlane, options: { waitMs: number; force: boolean }, onNote?: Note): Promise<boolean> {
  const name = manifest.metadata.name;
  const result = await underLease(runtime.store, name, leaseOptions(runtime, name, options, onNote), (writer) => destroyControlPlane({ cluster: name, provider: runtime.provider(manifest), store: runtime.store }, writer));
  return result.done;
}

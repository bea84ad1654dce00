import type { ControlPlane } from '../api/control-plane.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { underLease } from '../lease/under-lease.ts';
import { leaseOptions } from './lease.ts';
import type { Note, Runtime } from './runtime.ts';

/** Stops every member of a control plane by PID and deletes its machines and records, under the lease. */
export async function destroyControlPlane(runtime: Runtime, manifest: ControlPlane, writer: FencedWriter): Promise<void> {
  await writer.verify();
  await runtime.provider(manifest).destroyCluster(manifest.metadata.name, writer.fence);
  await runtime.store.deleteControlPlane(writer.lease);
}

/**
 * Deletes a control plane under its lease, like any writer: a live holder is asked to stop and given
 * `waitMs` to finish its in-flight actions; with `force` it is then fenced out (its next write fails).
 * False when the holder did not stop and `force` was not given.
 */
export async function destroyUnderLease(runtime: Runtime, manifest: ControlPlane, options: { waitMs: number; force: boolean }, onNote?: Note): Promise<boolean> {
  const name = manifest.metadata.name;
  const result = await underLease(runtime.store, name, leaseOptions(runtime, name, options, onNote), (writer) => destroyControlPlane(runtime, manifest, writer));
  return result.done;
}

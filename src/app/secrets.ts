import { underClusterLease, type LeaseWork } from './lease.ts';
import type { Note, Runtime } from './runtime.ts';

/** What a rotation did to one control plane: how many of its documents it sealed again, or why not. */
export interface ClusterRotation {
  name: string;
  work: LeaseWork<{ documents: number; resealed: number }>;
}

/**
 * Seals the documents of every control plane in the store again with this host's first key, one
 * cluster at a time under its lease (a reconcile's write of the same document is never overwritten
 * with an older value). Once every cluster is done, the other keys can leave every host's key file.
 */
export async function rotateSecrets(runtime: Runtime, onNote: Note): Promise<ClusterRotation[]> {
  const clusters = await runtime.store.listControlPlanes();
  onNote(`sealing the documents of ${String(clusters.length)} control plane(s) with key ${runtime.sealingKey}`);
  const rotations: ClusterRotation[] = [];
  for (const [index, cp] of clusters.entries()) {
    const work = await underClusterLease(runtime, cp.name, 'sealing with the new key', () => runtime.resealSecrets(cp.manifest), onNote);
    const said = work.done ? `${String(work.value.resealed)} of ${String(work.value.documents)} documents sealed again` : work.message;
    onNote(`[${String(index + 1)}/${String(clusters.length)}] ${cp.name}: ${said}`);
    rotations.push({ name: cp.name, work });
  }
  return rotations;
}

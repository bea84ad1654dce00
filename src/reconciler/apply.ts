import type { ControlPlane } from '../api/control-plane.ts';
import type { ControlPlaneRecord } from '../domain/machine.ts';
import type { StateStore } from '../ports/state-store.ts';

/** Stores the desired state: a new control plane record, or the new spec of an existing one. */
export function applyControlPlane(store: StateStore, manifest: ControlPlane, now: number): ControlPlaneRecord {
  const existing = store.getControlPlane(manifest.metadata.name);
  const record: ControlPlaneRecord = existing
    ? { ...existing, manifest }
    : { name: manifest.metadata.name, manifest, createdAt: now, clusterToken: `fastplane-${manifest.metadata.name}-${String(now)}`, nextOrdinal: 1 };
  store.putControlPlane(record);
  return record;
}

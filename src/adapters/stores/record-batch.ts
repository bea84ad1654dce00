import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../domain/machine.ts';
import { deriveControlPlane, patchControlPlane, patchMachine } from '../../domain/record-writes.ts';
import type { StoreWrite } from '../../ports/state-store.ts';

/** Deep copy of plain data (objects, arrays, primitives), as the records are: cheaper than structuredClone for small records. */
export function copy<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((item: unknown) => copy(item)) as T;
  const source = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key in source) out[key] = copy(source[key]);
  return out as T;
}

/** A cluster's records after a batch: what the store then writes in one go, or not at all. */
export interface BatchResult {
  controlPlane: ControlPlaneRecord | undefined;
  machines: Map<string, MachineRecord>;
  /** The events to append, in order, without their seq (the store numbers them). */
  events: EventRecord[];
}

/**
 * Applies a fenced batch to one read of the cluster's records, computing everything before anything is
 * stored, so a refused write (StoreRefusedError) leaves no partial batch. Records are never changed in
 * place: the caller's maps and objects stay as they were read.
 */
export function applyBatch(cluster: string, controlPlane: ControlPlaneRecord | undefined, machines: ReadonlyMap<string, MachineRecord>, writes: readonly StoreWrite[]): BatchResult {
  let cp = controlPlane;
  const next = new Map(machines);
  const events: EventRecord[] = [];
  for (const write of writes) {
    switch (write.kind) {
      case 'CreateMachine':
        // An existing name is an idempotent retry: the record stays as it is.
        if (!next.has(write.record.name)) next.set(write.record.name, copy(write.record));
        break;
      case 'PatchMachine': {
        const current = next.get(write.name);
        if (current) next.set(write.name, copy(patchMachine(current, write.set, write.unset)));
        break;
      }
      case 'DeleteMachine':
        next.delete(write.name);
        break;
      case 'PatchControlPlane':
        if (cp) cp = copy(patchControlPlane(cp, write.patch));
        break;
      case 'ReserveOrdinal':
      case 'RecordRemediation':
      case 'AbandonInit':
        if (cp) cp = deriveControlPlane(cp, write);
        break;
      case 'AppendEvent':
        events.push(copy({ ...write.event, cluster }));
        break;
    }
  }
  return { controlPlane: cp, machines: next, events };
}

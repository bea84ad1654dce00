import type { ControlPlane } from '../api/control-plane.ts';
import type { ControlPlaneRecord, MachineRecord } from './machine.ts';
import { nextRemediation } from './remediation.ts';

/**
 * How a store applies writes to records: the same rules for every store implementation, so the
 * invariants they keep (init exactly once, ordinals only grow) do not depend on which one runs.
 */

/** A write that would break an invariant the store keeps (init once, ordinals only grow). */
export class StoreRefusedError extends Error {
  override readonly name = 'StoreRefusedError';
}

type ControlPlaneFields = Pick<
  ControlPlaneRecord,
  'nextOrdinal' | 'initMachine' | 'restoreFrom' | 'initializedAt' | 'lastRemediation' | 'conditions' | 'observedGeneration' | 'lastPass' | 'highestRaftIndex' | 'lastBackupAttempt' | 'lastMaintenance' | 'careJob'
>;

/** The control-plane fields a reconcile pass writes; the rest change only through a new spec. */
export type ControlPlanePatch = Partial<ControlPlaneFields>;

export function patchControlPlane(current: ControlPlaneRecord, patch: ControlPlanePatch): ControlPlaneRecord {
  if (patch.nextOrdinal !== undefined && patch.nextOrdinal < current.nextOrdinal) {
    throw new StoreRefusedError(`control plane ${current.name}: nextOrdinal cannot go down (${String(current.nextOrdinal)} -> ${String(patch.nextOrdinal)})`);
  }
  if (patch.initMachine !== undefined && current.initMachine !== undefined && patch.initMachine !== current.initMachine) {
    throw new StoreRefusedError(`control plane ${current.name}: initialized by ${current.initMachine} already; a cluster is initialized once`);
  }
  if (patch.initMachine !== undefined && current.abandonedInits?.includes(patch.initMachine) === true) {
    throw new StoreRefusedError(`control plane ${current.name}: ${patch.initMachine} was abandoned as init machine; it never initializes`);
  }
  const next: ControlPlaneRecord = { ...current };
  for (const [key, value] of Object.entries(patch) as [keyof ControlPlaneFields, unknown][]) {
    if (value !== undefined) Object.assign(next, { [key]: value });
  }
  return next;
}

export function patchMachine(current: MachineRecord, set: Partial<MachineRecord>, unset: readonly (keyof MachineRecord)[] = []): MachineRecord {
  const next: MachineRecord = { ...current };
  for (const [key, value] of Object.entries(set) as [string, unknown][]) {
    if (value !== undefined) Object.assign(next, { [key]: value });
  }
  for (const key of unset) Reflect.deleteProperty(next, key);
  return next;
}

export type DerivedWrite =
  | { kind: 'ReserveOrdinal'; ordinal: number }
  | { kind: 'RecordRemediation'; machine: string; at: number; minHealthyPeriodMs: number }
  | { kind: 'AbandonInit'; machine: string };

/**
 * Applies the writes that derive a control-plane field from its stored value (both stores share this).
 * AbandonInit is the only way `initMachine` is ever cleared, and only while it still names that
 * machine: a retry after the next init was recorded changes nothing.
 */
export function deriveControlPlane(current: ControlPlaneRecord, write: DerivedWrite): ControlPlaneRecord {
  if (write.kind === 'ReserveOrdinal') return { ...current, nextOrdinal: Math.max(current.nextOrdinal, write.ordinal + 1) };
  if (write.kind === 'AbandonInit') {
    if (current.initMachine !== write.machine) return current;
    const next: ControlPlaneRecord = { ...current, abandonedInits: [...(current.abandonedInits ?? []), write.machine] };
    delete next.initMachine;
    return next;
  }
  return { ...current, lastRemediation: nextRemediation(current.lastRemediation, write.machine, write.at, write.minHealthyPeriodMs) };
}

/** Key order never matters to the comparison: specs from a file and from the store compare equal. */
function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (typeof value !== 'object' || value === null) return value;
  const entries = Object.entries(value).filter(([, v]) => v !== undefined);
  return Object.fromEntries(entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([k, v]) => [k, canonical(v)]));
}

export function sameSpec(a: ControlPlane['spec'], b: ControlPlane['spec']): boolean {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function shown(value: unknown): string {
  return value === undefined ? 'unset' : JSON.stringify(value);
}

/** The spec fields that differ, `path: old -> new`, for messages about a newer generation. */
export function specDifferences(before: ControlPlane['spec'], after: ControlPlane['spec']): string[] {
  const out: string[] = [];
  const walk = (a: unknown, b: unknown, path: string): void => {
    const bothObjects = typeof a === 'object' && a !== null && typeof b === 'object' && b !== null && !Array.isArray(a) && !Array.isArray(b);
    if (bothObjects) {
      const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
      for (const key of [...keys].sort()) walk((a as Record<string, unknown>)[key], (b as Record<string, unknown>)[key], `${path}.${key}`);
      return;
    }
    if (JSON.stringify(canonical(a)) !== JSON.stringify(canonical(b))) out.push(`${path}: ${shown(a)} -> ${shown(b)}`);
  };
  walk(before, after, 'spec');
  return out;
}

/** The record of the desired state after an apply: new (generation 1), unchanged, or the next generation. */
export function applySpecTo(existing: ControlPlaneRecord | undefined, manifest: ControlPlane, now: number): { record: ControlPlaneRecord; created: boolean; changed: boolean } {
  if (!existing) {
    const name = manifest.metadata.name;
    return { record: { name, manifest, generation: 1, createdAt: now, clusterToken: `fastplane-${name}-${String(now)}`, nextOrdinal: 1 }, created: true, changed: true };
  }
  if (sameSpec(existing.manifest.spec, manifest.spec)) return { record: existing, created: false, changed: false };
  return { record: { ...existing, manifest, generation: existing.generation + 1 }, created: false, changed: true };
}

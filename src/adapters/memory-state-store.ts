import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../domain/machine.ts';
import type { StateStore } from '../ports/state-store.ts';
import { isProcessAlive } from './process-status.ts';

/**
 * The StateStore in memory, for tests and the simulator. Same semantics as the SQLite store (the shared
 * StateStore contract runs against both), and cheap enough for simulations of thousands of passes: a
 * transaction costs O(records), not O(the whole event log), because stored values are never mutated,
 * so a snapshot is a shallow copy of the maps plus the event count.
 */

/** Deep copy of plain data (objects, arrays, primitives), as the records are. */
function copy<T>(value: T): T {
  if (typeof value !== 'object' || value === null) return value;
  if (Array.isArray(value)) return value.map((item: unknown) => copy(item)) as T;
  const source = value as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  for (const key in source) out[key] = copy(source[key]);
  return out as T;
}

interface Lease {
  pid: number;
  token: string;
}

interface Snapshot {
  controlPlanes: Map<string, ControlPlaneRecord>;
  machines: Map<string, Map<string, MachineRecord>>;
  events: EventRecord[];
  eventCount: number;
  leases: Map<string, Lease>;
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export interface MemoryStateStoreOptions {
  /** Whether a lease holder's process is alive (default: ask the OS). */
  isHolderAlive?: (pid: number) => boolean;
}

export class MemoryStateStore implements StateStore {
  private controlPlanes = new Map<string, ControlPlaneRecord>();
  private machines = new Map<string, Map<string, MachineRecord>>();
  /** Append-only between deletions; elements are never changed in place. */
  private events: EventRecord[] = [];
  private leases = new Map<string, Lease>();

  private readonly isHolderAlive: (pid: number) => boolean;

  constructor(options: MemoryStateStoreOptions = {}) {
    this.isHolderAlive = options.isHolderAlive ?? isProcessAlive;
  }

  getControlPlane(name: string): ControlPlaneRecord | undefined {
    const record = this.controlPlanes.get(name);
    return record && copy(record);
  }

  listControlPlanes(): ControlPlaneRecord[] {
    return [...this.controlPlanes.values()].sort((a, b) => a.createdAt - b.createdAt || compareText(a.name, b.name)).map(copy);
  }

  putControlPlane(record: ControlPlaneRecord): void {
    this.controlPlanes.set(record.name, copy(record));
  }

  deleteControlPlane(name: string): void {
    this.controlPlanes.delete(name);
    this.machines.delete(name);
    this.events = this.events.filter((event) => event.cluster !== name);
    this.leases.delete(name);
  }

  listMachines(cluster: string): MachineRecord[] {
    return [...(this.machines.get(cluster)?.values() ?? [])].sort((a, b) => a.ordinal - b.ordinal || compareText(a.name, b.name)).map(copy);
  }

  getMachine(cluster: string, name: string): MachineRecord | undefined {
    const record = this.machines.get(cluster)?.get(name);
    return record && copy(record);
  }

  putMachine(record: MachineRecord): void {
    // Copy-on-write of the cluster's map, so a snapshot holding the old map stays intact.
    const machines = new Map(this.machines.get(record.cluster));
    machines.set(record.name, copy(record));
    this.machines.set(record.cluster, machines);
  }

  deleteMachine(cluster: string, name: string): void {
    const current = this.machines.get(cluster);
    if (!current?.has(name)) return;
    const machines = new Map(current);
    machines.delete(name);
    if (machines.size === 0) this.machines.delete(cluster);
    else this.machines.set(cluster, machines);
  }

  appendEvent(event: EventRecord): void {
    this.events.push(copy(event));
  }

  listEvents(cluster: string): EventRecord[] {
    return this.events.filter((event) => event.cluster === cluster).map(copy);
  }

  transaction<T>(fn: () => T): T {
    const snapshot: Snapshot = {
      controlPlanes: new Map(this.controlPlanes),
      machines: new Map(this.machines),
      events: this.events,
      eventCount: this.events.length,
      leases: new Map(this.leases),
    };
    try {
      const result = fn();
      if (typeof result === 'object' && result !== null && typeof (result as { then?: unknown }).then === 'function') {
        throw new TypeError('Transaction function cannot return a promise');
      }
      return result;
    } catch (error) {
      this.controlPlanes = snapshot.controlPlanes;
      this.machines = snapshot.machines;
      snapshot.events.length = snapshot.eventCount;
      this.events = snapshot.events;
      this.leases = snapshot.leases;
      throw error;
    }
  }

  acquireLease(cluster: string, holder: { pid: number; token: string }): boolean {
    const current = this.leases.get(cluster);
    if (current && current.token !== holder.token && this.isHolderAlive(current.pid)) return false;
    this.leases.set(cluster, { pid: holder.pid, token: holder.token });
    return true;
  }

  releaseLease(cluster: string, token: string): void {
    if (this.leases.get(cluster)?.token === token) this.leases.delete(cluster);
  }

  close(): void {
    // Nothing to release.
  }
}

import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../domain/machine.ts';
import type { StateStore } from '../ports/state-store.ts';

/**
 * Whether a lease holder's process still exists. EPERM means it exists but belongs to another user.
 * A pid that is not a positive integer names no single process (0 and negatives address process
 * groups), so such a holder counts as gone.
 */
export function isProcessAlive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

interface Lease {
  pid: number;
  token: string;
  acquiredAt: number;
}

interface State {
  controlPlanes: Map<string, ControlPlaneRecord>;
  /** cluster -> machine name -> record */
  machines: Map<string, Map<string, MachineRecord>>;
  events: EventRecord[];
  leases: Map<string, Lease>;
}

export interface MemoryStateStoreOptions {
  /** Decides whether a lease holder still runs; the simulator can fake process lifetimes with it. */
  isHolderAlive?: (pid: number) => boolean;
}

/** The StateStore in memory, with the SQLite store's semantics, for the simulator and tests. */
export class MemoryStateStore implements StateStore {
  private state: State = { controlPlanes: new Map(), machines: new Map(), events: [], leases: new Map() };
  private readonly isHolderAlive: (pid: number) => boolean;

  constructor(options: MemoryStateStoreOptions = {}) {
    this.isHolderAlive = options.isHolderAlive ?? isProcessAlive;
  }

  // Records are cloned on the way in and out so that, as with SQLite, callers never share stored objects.

  getControlPlane(name: string): ControlPlaneRecord | undefined {
    const record = this.state.controlPlanes.get(name);
    return record && structuredClone(record);
  }

  listControlPlanes(): ControlPlaneRecord[] {
    return [...this.state.controlPlanes.values()]
      .sort((a, b) => a.createdAt - b.createdAt || compareText(a.name, b.name))
      .map((record) => structuredClone(record));
  }

  putControlPlane(record: ControlPlaneRecord): void {
    this.state.controlPlanes.set(record.name, structuredClone(record));
  }

  deleteControlPlane(name: string): void {
    this.state.controlPlanes.delete(name);
    this.state.machines.delete(name);
    this.state.events = this.state.events.filter((event) => event.cluster !== name);
    this.state.leases.delete(name);
  }

  listMachines(cluster: string): MachineRecord[] {
    return [...(this.state.machines.get(cluster)?.values() ?? [])]
      .sort((a, b) => a.ordinal - b.ordinal || compareText(a.name, b.name))
      .map((record) => structuredClone(record));
  }

  getMachine(cluster: string, name: string): MachineRecord | undefined {
    const record = this.state.machines.get(cluster)?.get(name);
    return record && structuredClone(record);
  }

  putMachine(record: MachineRecord): void {
    let machines = this.state.machines.get(record.cluster);
    if (!machines) {
      machines = new Map();
      this.state.machines.set(record.cluster, machines);
    }
    machines.set(record.name, structuredClone(record));
  }

  deleteMachine(cluster: string, name: string): void {
    const machines = this.state.machines.get(cluster);
    machines?.delete(name);
    if (machines?.size === 0) this.state.machines.delete(cluster);
  }

  appendEvent(event: EventRecord): void {
    this.state.events.push(structuredClone(event));
  }

  listEvents(cluster: string): EventRecord[] {
    return this.state.events.filter((event) => event.cluster === cluster).map((event) => structuredClone(event));
  }

  transaction<T>(fn: () => T): T {
    const snapshot = structuredClone(this.state);
    try {
      const result = fn();
      // As better-sqlite3 does: writes after an await would land outside the transaction.
      if (isThenable(result)) throw new TypeError('Transaction function cannot return a promise');
      return result;
    } catch (error) {
      this.state = snapshot;
      throw error;
    }
  }

  acquireLease(cluster: string, holder: { pid: number; token: string }): boolean {
    const current = this.state.leases.get(cluster);
    if (current && current.token !== holder.token && this.isHolderAlive(current.pid)) return false;
    this.state.leases.set(cluster, { pid: holder.pid, token: holder.token, acquiredAt: Date.now() });
    return true;
  }

  releaseLease(cluster: string, token: string): void {
    if (this.state.leases.get(cluster)?.token === token) this.state.leases.delete(cluster);
  }

  /** Nothing to release; the state lives as long as the object. */
  close(): void {
    // Intentionally empty.
  }
}

function isThenable(value: unknown): boolean {
  return typeof value === 'object' && value !== null && typeof (value as { then?: unknown }).then === 'function';
}

/** Plain code-unit order, which matches SQLite's BINARY collation for the ASCII names used here. */
function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

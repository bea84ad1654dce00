import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../domain/machine.ts';

/** Durable records. Synchronous: both implementations (SQLite, memory) are local and fast. */
export interface StateStore {
  getControlPlane(name: string): ControlPlaneRecord | undefined;
  listControlPlanes(): ControlPlaneRecord[];
  putControlPlane(record: ControlPlaneRecord): void;
  /** Removes the control plane with its machines and events. */
  deleteControlPlane(name: string): void;
  listMachines(cluster: string): MachineRecord[];
  getMachine(cluster: string, name: string): MachineRecord | undefined;
  putMachine(record: MachineRecord): void;
  deleteMachine(cluster: string, name: string): void;
  appendEvent(event: EventRecord): void;
  listEvents(cluster: string): EventRecord[];
  /** Runs fn in one transaction (all writes or none). */
  transaction<T>(fn: () => T): T;
  /**
   * The per-cluster controller lease: one fastplane process reconciles a cluster at a time, which makes
   * the membership gate hold across processes. A lease whose holder process is gone is taken over.
   */
  acquireLease(cluster: string, holder: { pid: number; token: string }): boolean;
  releaseLease(cluster: string, token: string): void;
  close(): void;
}

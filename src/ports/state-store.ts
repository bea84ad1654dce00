import type { ControlPlane } from '../api/control-plane.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../domain/machine.ts';
import type { ControlPlanePatch } from '../domain/record-writes.ts';

export { StoreRefusedError, type ControlPlanePatch } from '../domain/record-writes.ts';

/**
 * Durable records, shared by every fastplane process (and, with a networked store, every host).
 *
 * Who may write what:
 * - Anyone may store a new spec (`applySpec`): intent is never refused; it bumps the generation.
 * - Everything else is written only by the holder of the cluster's lease, in `commit` batches that
 *   the store applies only if the writer's token is still the cluster's lease, checked in the same
 *   transaction (fencing). A writer that lost its lease gets `FencedOutError` and writes nothing.
 * - Control-plane fields are patched field by field, never rewritten whole; the store refuses to
 *   change `initMachine` once set or to lower `nextOrdinal` (`StoreRefusedError`); only `AbandonInit`
 *   clears it, for an init member that never started.
 */
export interface StateStore {
  getControlPlane(name: string): Promise<ControlPlaneRecord | undefined>;
  listControlPlanes(): Promise<ControlPlaneRecord[]>;
  listMachines(cluster: string): Promise<MachineRecord[]>;
  getMachine(cluster: string, name: string): Promise<MachineRecord | undefined>;
  /** The cluster's events in order, each with its `seq`; only those after `afterSeq` when given. */
  listEvents(cluster: string, afterSeq?: number): Promise<EventRecord[]>;

  /** Stores the desired state: creates the record (generation 1) or, when the spec differs, bumps the generation. */
  applySpec(manifest: ControlPlane, now: number): Promise<AppliedSpec>;
  /** Applies the writes atomically, only while `lease` is the cluster's lease. */
  commit(lease: WriterLease, writes: readonly StoreWrite[]): Promise<void>;
  /** Removes the control plane with its machines, events and lease, under the caller's lease. */
  deleteControlPlane(lease: WriterLease): Promise<void>;

  /**
   * Takes the cluster's lease when it is free, expired (not renewed within its TTL), or held by a
   * process proven gone (see ProcessIdentity), or always with `force` (the old holder is then fenced
   * out). True when `holder.token` now holds it.
   *
   * Expiry is judged on one clock, the store's own, never by comparing the clocks of two processes:
   * etcd expires the lease server-side (an etcd lease with the holder's TTL), SQLite on its host's
   * clock. `now` (the caller's clock) dates the record for messages, and is the clock itself only for
   * the in-process memory store, whose callers all share it.
   */
  acquireLease(cluster: string, holder: LeaseHolder, now: number, options?: { force?: boolean }): Promise<boolean>;
  /** Renews the caller's lease for its TTL from (at the latest) the call; undefined when it is no longer the caller's. */
  renewLease(cluster: string, token: string, now: number): Promise<LeaseRecord | undefined>;
  releaseLease(cluster: string, token: string): Promise<void>;
  getLease(cluster: string): Promise<LeaseRecord | undefined>;
  /** Asks the holder to stop (`fastplane down`); it sees the request when it next renews. */
  requestStop(cluster: string, token: string): Promise<void>;

  /** Calls onChange(cluster) soon (well under 1 s) after any process stores a new generation of that
   *  cluster's spec or deletes it; also once per existing cluster right after the watch starts. */
  watchSpecs(onChange: (cluster: string) => void): SpecWatch;
  /** Claims `key` in `pool` for `owner`: true when owner holds it after the call (new or already). */
  claim(pool: string, key: string, owner: string): Promise<boolean>;
  /** Releases the claim when `owner` holds it; otherwise does nothing. */
  releaseClaim(pool: string, key: string, owner: string): Promise<void>;
  listClaims(pool: string): Promise<ResourceClaim[]>;

  /**
   * A provider's own state of a cluster (its CA, its machines: `scope` names provider and cluster),
   * kept where the cluster's records are, so every process that shares the store, on any host, can
   * act on the cluster's machines. Unfenced, like claims: written by the provider's calls, which run
   * under the cluster's lease or before the cluster exists. Values are opaque text (JSON).
   */
  getDocument(scope: string, key: string): Promise<string | undefined>;
  putDocument(scope: string, key: string, value: string): Promise<void>;
  deleteDocument(scope: string, key: string): Promise<void>;
  /**
   * Stores `puts` and removes `deletes` as one write: a reader sees all of them or none, even when the
   * call fails. With `condition`, only while that document holds the value given, checked inside the
   * same write; otherwise nothing is written and DocumentConflictError is thrown.
   */
  putDocuments(scope: string, puts: readonly StoredDocument[], deletes: readonly string[], condition?: DocumentCondition): Promise<void>;
  /** Every document of the scope, by key. */
  listDocuments(scope: string): Promise<StoredDocument[]>;
  close(): Promise<void>;
}

export interface SpecWatch {
  close(): Promise<void>;
}

/** A resource (an address slot, say) taken by one owner, for every process that uses the store. */
export interface ResourceClaim {
  pool: string;
  key: string;
  owner: string;
}

export interface StoredDocument {
  key: string;
  value: string;
}

/** The value a conditional write requires a document to hold when it is applied (undefined: no such document). */
export interface DocumentCondition {
  key: string;
  value: string | undefined;
}

/** A conditional document write found its condition no longer true (another writer came first): nothing was written. */
export class DocumentConflictError extends Error {
  override readonly name = 'DocumentConflictError';
  constructor(
    readonly scope: string,
    readonly key: string,
  ) {
    super(`${scope}: document ${key} changed since it was read (another writer came first); nothing was written`);
  }
}

export interface AppliedSpec {
  record: ControlPlaneRecord;
  created: boolean;
  /** False when the stored spec was already this one (the generation did not move). */
  changed: boolean;
}

export interface WriterLease {
  cluster: string;
  token: string;
  /** The lease's fencing number (LeaseRecord.fence), which the holder's provider calls carry. */
  fence?: number;
}

export interface LeaseHolder {
  token: string;
  /** Who holds it, for messages: host name and PID, or a controller's --id. */
  holder: string;
  /** For messages only: two hosts or containers may share a host name. */
  host: string;
  pid: number;
  ttlMs: number;
  /** The holding process as its kernel knows it; absent where /proc cannot tell (and in older records). */
  identity?: ProcessIdentity;
}

/**
 * A process as its host's kernel knows it: what proves, on that host and in that PID namespace only,
 * that it is gone. A host name proves nothing (containers and cloned hosts share them), nor does a PID
 * alone (PIDs are reused), so a holder is proven gone only when boot and PID namespace are the prover's
 * and its PID is free or names a process started at another time.
 */
export interface ProcessIdentity {
  /** /proc/sys/kernel/random/boot_id: this boot of this kernel. */
  bootId: string;
  /** The PID namespace, as `readlink /proc/self/ns/pid` names it (`pid:[4026531836]`). */
  pidNamespace: string;
  pid: number;
  /** Field 22 of /proc/PID/stat: when the process started, in clock ticks since boot. */
  startTime: number;
}

export interface LeaseRecord extends LeaseHolder {
  cluster: string;
  acquiredAt: number;
  renewedAt: number;
  stopRequested: boolean;
  /**
   * The fencing number: set by the store when a new token takes the lease, higher than every number
   * the store gave before (any cluster), kept by renewals. Hosts refuse calls carrying a lower one.
   */
  fence?: number;
}

export type StoreWrite =
  /** Creates the machine record unless one of that name exists (an idempotent retry). */
  | { kind: 'CreateMachine'; record: MachineRecord }
  | { kind: 'PatchMachine'; name: string; set: Partial<MachineRecord>; unset?: readonly (keyof MachineRecord)[] }
  | { kind: 'DeleteMachine'; name: string }
  | { kind: 'PatchControlPlane'; patch: ControlPlanePatch }
  /** Raises nextOrdinal above a machine's ordinal (concurrent creations never lower it). */
  | { kind: 'ReserveOrdinal'; ordinal: number }
  /** Counts a remediation against the stored sequence (several in one pass each count). */
  | { kind: 'RecordRemediation'; machine: string; at: number; minHealthyPeriodMs: number }
  /** Clears initMachine while it still names `machine` (deleted, its member never started) and lists it as abandoned. */
  | { kind: 'AbandonInit'; machine: string }
  | { kind: 'AppendEvent'; event: EventRecord };

/** The writer's lease is gone (expired and taken over, or deleted): it must stop acting. */
export class FencedOutError extends Error {
  override readonly name = 'FencedOutError';
  constructor(readonly cluster: string) {
    super(`this process no longer holds the lease of control plane ${cluster}; another fastplane process took over`);
  }
}

/**
 * Whether another writer may take a lease at `now`, on a clock every user of the store shares (the
 * memory store's): not renewed within its own TTL, or its holder is no longer alive (`isAlive` says
 * "alive" unless the holder is proven gone).
 */
export function leaseIsFree(lease: LeaseRecord, now: number, isAlive: (holder: LeaseHolder) => boolean): boolean {
  return now - lease.renewedAt > lease.ttlMs || !isAlive(lease);
}

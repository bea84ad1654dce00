import { InvalidInputError } from '../api/errors.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../domain/machine.ts';
import type { LastMembershipAttempt, MachineAction } from '../planner/types.ts';
import type { CarePort } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin } from '../ports/etcd-admin.ts';
import type { InfraProvider } from '../ports/machine-provider.ts';
import { FencedOutError, StoreRefusedError, type StateStore } from '../ports/state-store.ts';
import { FailpointCrash, type FailpointHook } from './failpoints.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';

// What every handler works with: the ports, the lease, and the records they share.

export interface ExecutorDeps {
  cluster: string;
  etcd: EtcdAdmin;
  provider: InfraProvider;
  /** Reads; every write goes through `writer`, fenced by the cluster's lease. */
  store: StateStore;
  writer: FencedWriter;
  clock: Clock;
  failpoint: FailpointHook;
  /** Every recorded event is also passed here (progress display, logs). */
  notify?: (event: EventRecord) => void;
  /** Backups, certificates and NOSPACE recovery; without it care actions fail (the simulator plans none). */
  care?: CarePort;
}

export interface ExecutionReport {
  /** Set when the membership action failed (etcd refusal, timeout): the next plan explains and retries. */
  membershipAttempt?: LastMembershipAttempt;
  machineErrors: { action: MachineAction; error: string }[];
}

export async function controlPlane(deps: ExecutorDeps): Promise<ControlPlaneRecord> {
  const record = await deps.store.getControlPlane(deps.cluster);
  if (!record) throw new Error(`control plane ${deps.cluster} has no record`);
  return record;
}

export async function machineRecord(deps: ExecutorDeps, name: string): Promise<MachineRecord> {
  const record = await deps.store.getMachine(deps.cluster, name);
  if (!record) throw new Error(`machine ${name} has no record`);
  return record;
}

/** Errors that end the run instead of being reported and retried on the next pass. */
export function endsTheRun(error: unknown): boolean {
  return error instanceof FailpointCrash || error instanceof InvalidInputError || error instanceof FencedOutError || error instanceof StoreRefusedError;
}

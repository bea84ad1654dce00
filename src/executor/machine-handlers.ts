import { parseDuration } from '../api/duration.ts';
import type { MachineRecord } from '../domain/machine.ts';
import { machineTemplateHash } from '../planner/spec.ts';
import type { CreateMachine, Decision, MachineAction, Observed } from '../planner/types.ts';
import { launchFor, startMemberAs } from '../cluster/member-launch.ts';
import { controlPlane, emit, endsTheRun, machineOf, machineRecord, type ExecutorDeps } from './executor-deps.ts';

// Machine actions: many run at once, each idempotent.

async function createMachine(deps: ExecutorDeps, action: CreateMachine): Promise<void> {
  const cp = await controlPlane(deps);
  const now = deps.clock.now();
  const record: MachineRecord = {
    cluster: deps.cluster,
    name: action.machine,
    ordinal: action.ordinal,
    version: action.version,
    templateHash: machineTemplateHash(cp.manifest),
    createdAt: now,
    phase: 'Pending',
    phaseTimes: { Pending: now },
  };
  if (action.failureDomain !== undefined) record.failureDomain = action.failureDomain;
  await deps.writer.commit({ kind: 'CreateMachine', record }, { kind: 'ReserveOrdinal', ordinal: action.ordinal });
  deps.failpoint('after-create-record');
  await deps.writer.verify();
  const request = { cluster: deps.cluster, name: action.machine, ordinal: action.ordinal, ...(action.failureDomain !== undefined ? { failureDomain: action.failureDomain } : {}) };
  const infra = await deps.provider.create(request);
  deps.failpoint('after-provider-create');
  const latest = await machineRecord(deps, action.machine);
  const at = deps.clock.now();
  await deps.writer.commit({
    kind: 'PatchMachine',
    name: action.machine,
    set: {
      address: infra.address,
      clientURL: infra.clientURL,
      peerURL: infra.peerURL,
      phase: 'Provisioning',
      phaseTimes: { ...latest.phaseTimes, Provisioning: latest.phaseTimes.Provisioning ?? at },
    },
  });
}

/**
 * Provisioning goes on between passes: a machine still Provisioning that no action of this decision
 * concerns is moved on here (an ssh machine waiting for a host, or one a crash left half done), never
 * by describing it, which only reads. A failure to move it on is an event; the provider records a
 * provisioning failure on the machine itself, which the next pass sees as Failed.
 */
export function resumeProvisioning(deps: ExecutorDeps, observed: Observed, decision: Decision): Promise<void>[] {
  const acted = new Set(decision.machineActions.map(machineOf));
  return observed.machines
    .filter((m) => m.infra?.state === 'Provisioning' && !acted.has(m.record.name))
    .map(async ({ record }) => {
      try {
        await deps.provider.provision(deps.cluster, record.name);
      } catch (error) {
        if (endsTheRun(error)) throw error;
        const at = deps.clock.now();
        const message = `CreateMachine ${record.name} failed: ${error instanceof Error ? error.message : String(error)}`;
        await emit(deps, { at, endedAt: at, type: 'Warning', reason: 'ResumeCreate', action: 'CreateMachine', outcome: 'Failed', message, machine: record.name });
      }
    });
}

/** Each call moves the teardown on (stop, then wipe when due); the record goes once the machine is gone. */
async function deleteMachine(deps: ExecutorDeps, name: string): Promise<void> {
  deps.failpoint('before-delete-machine');
  await deps.writer.verify();
  await deps.provider.delete(deps.cluster, name);
  deps.failpoint('after-provider-delete');
  if ((await deps.provider.describe(deps.cluster, name)) === undefined) await deps.writer.commit({ kind: 'DeleteMachine', name });
}

export async function runMachineAction(deps: ExecutorDeps, action: MachineAction): Promise<void> {
  const now = deps.clock.now();
  switch (action.kind) {
    case 'CreateMachine':
      return createMachine(deps, action);
    case 'DeleteMachine':
      return deleteMachine(deps, action.machine);
    case 'MarkMachineFailed': {
      const cp = await controlPlane(deps);
      // Counted by the store against the stored sequence: failures marked in one pass each count.
      await deps.writer.commit(
        { kind: 'PatchMachine', name: action.machine, set: { failed: { reason: action.reason, message: action.message, at: now } } },
        { kind: 'RecordRemediation', machine: action.machine, at: now, minHealthyPeriodMs: parseDuration(cp.manifest.spec.remediation.minHealthyPeriod) ?? 0 },
      );
      return;
    }
    case 'RequestMachineDeletion':
      await deps.writer.commit({ kind: 'PatchMachine', name: action.machine, set: { deleteRequested: { reason: action.reason, at: now } } });
      return;
    case 'RestartMember': {
      const record = await machineRecord(deps, action.machine);
      if (record.peerURL === undefined) throw new Error(`machine ${action.machine} has no peer URL`);
      await deps.writer.verify();
      // On a data dir etcd ignores --initial-cluster, and without quorum the member list may be unreadable.
      await startMemberAs(deps, record, launchFor(await controlPlane(deps), record, `${action.machine}=${record.peerURL}`, 'existing'));
      return;
    }
    case 'AbandonInit':
      await deps.writer.commit({ kind: 'AbandonInit', machine: action.machine });
      return;
  }
}

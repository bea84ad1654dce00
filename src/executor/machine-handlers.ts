import { parseDuration } from '../api/duration.ts';
import type { ControlPlaneRecord, MachineRecord } from '../domain/machine.ts';
import { machineTemplateHash } from '../planner/spec.ts';
import type { CreateMachine, MachineAction } from '../planner/types.ts';
import { startMachineMember } from '../cluster/member-launch.ts';
import { runComponentAction } from './component-handlers.ts';
import { machineRecord, type ExecutorDeps } from './executor-deps.ts';

// Machine actions: many run at once, each idempotent.

async function createMachine(deps: ExecutorDeps, cp: ControlPlaneRecord, action: CreateMachine): Promise<void> {
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
  if (cp.manifest.spec.kubernetes !== undefined) record.kubernetesVersion = cp.manifest.spec.kubernetes.version;
  await deps.writer.commit({ kind: 'CreateMachine', record }, { kind: 'ReserveOrdinal', ordinal: action.ordinal });
  deps.failpoint('after-create-record');
  await deps.writer.verify();
  const request = { cluster: deps.cluster, name: action.machine, ordinal: action.ordinal, fence: deps.writer.fence, ...(action.failureDomain !== undefined ? { failureDomain: action.failureDomain } : {}) };
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

/** Each call moves the teardown on (stop, then wipe when due); the record goes once the machine is gone. */
async function deleteMachine(deps: ExecutorDeps, name: string): Promise<void> {
  deps.failpoint('before-delete-machine');
  await deps.writer.verify();
  await deps.provider.delete(deps.cluster, name, deps.writer.fence);
  deps.failpoint('after-provider-delete');
  if ((await deps.provider.describe(deps.cluster, name)) === undefined) await deps.writer.commit({ kind: 'DeleteMachine', name });
}

/** `cp`: the control plane's record as this pass read it. */
export async function runMachineAction(deps: ExecutorDeps, cp: ControlPlaneRecord, action: MachineAction): Promise<string | undefined> {
  const now = deps.clock.now();
  switch (action.kind) {
    case 'CreateMachine':
      await createMachine(deps, cp, action);
      return undefined;
    case 'DeleteMachine':
      await deleteMachine(deps, action.machine);
      return undefined;
    case 'MarkMachineFailed': {
      // Counted by the store against the stored sequence: failures marked in one pass each count.
      await deps.writer.commit(
        { kind: 'PatchMachine', name: action.machine, set: { failed: { reason: action.reason, message: action.message, at: now } } },
        { kind: 'RecordRemediation', machine: action.machine, at: now, minHealthyPeriodMs: parseDuration(cp.manifest.spec.remediation.minHealthyPeriod) ?? 0 },
      );
      return undefined;
    }
    case 'RequestMachineDeletion':
      await deps.writer.commit({ kind: 'PatchMachine', name: action.machine, set: { deleteRequested: { reason: action.reason, at: now } } });
      return undefined;
    case 'RestartMember': {
      await deps.writer.verify();
      // On a data dir etcd ignores --initial-cluster, and without quorum the member list may be unreadable.
      await startMachineMember(deps, cp, action.machine, 'existing');
      return undefined;
    }
    case 'AbandonInit':
      await deps.writer.commit({ kind: 'AbandonInit', machine: action.machine });
      return undefined;
    case 'StartComponent':
    case 'StopComponents':
    case 'RouteEndpoint':
      return runComponentAction(deps, cp, action);
  }
}

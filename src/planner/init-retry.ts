import type { ObservedMachine, AbandonInit } from './types.ts';
import type { ClusterView } from './view.ts';

/**
 * An init member that never starts (its etcd exits at once, its disk is broken) would otherwise be
 * restarted forever: the cluster is initialised once in its life, so nothing else may bootstrap while
 * it is named. These rules let it go, still with at most one bootstrap: the init machine is marked
 * failed and deleted like any remediated machine (its data dir goes with it, so it never starts), and
 * only once its record is gone is the init abandoned; then the next provisioned machine initializes.
 */

/** No member was ever seen in this cluster: no voter, no member ID on any machine, never initialized. */
function noClusterYet(view: ClusterView): boolean {
  const { observed } = view;
  if (observed.initializedAt !== undefined) return false;
  if (observed.members.ok && observed.members.list.length > 0) return false;
  return observed.machines.every((m) => m.record.memberId === undefined && m.record.phaseTimes.Voter === undefined);
}

/** The init machine's member has not come up within learnerStuckAfter of the init being recorded. */
export function initNeverStarted(view: ClusterView, machine: ObservedMachine): { reason: string; message: string } | undefined {
  const { record, infra } = machine;
  // Without initRecordedAt (a record from before it existed) there is no start to measure from: keep restarting.
  const since = record.initRecordedAt;
  if (since === undefined || record.name !== view.observed.initMachine || infra?.state !== 'Provisioned' || infra.memberRunning || !noClusterYet(view)) return undefined;
  const waited = view.now - since;
  if (waited < view.spec.remediation.learnerStuckAfterMs) return undefined;
  return { reason: 'InitMemberNeverStarted', message: `the init member has not started in ${String(waited)} ms (learnerStuckAfter ${String(view.spec.remediation.learnerStuckAfterMs)} ms); another machine will initialize` };
}

/** Once the failed init machine is deleted (record and data dir), the init is abandoned for the next machine. */
export function abandonInit(view: ClusterView): AbandonInit | undefined {
  const init = view.observed.initMachine;
  if (init === undefined || !noClusterYet(view)) return undefined;
  if (view.observed.machines.some((m) => m.record.name === init)) return undefined;
  return { kind: 'AbandonInit', machine: init, reason: 'InitMachineDeleted' };
}

import { spreadOverFailureDomains } from '../domain/failure-domains.ts';
import { activeMachines, isGone, isReadyVoter, nameOf, type Step } from './step.ts';
import type { CreateMachine, ObservedMachine } from './types.ts';
import type { ClusterView } from './view.ts';

/**
 * Ordinals for `count` new machines, lowest free first. An ordinal fixes a machine's name and its
 * address (so its peer URL); with ordinals never reused, a long-lived cluster that is rolled and
 * remediated runs out of addresses (254 per cluster on the local provider). A freed ordinal is reused
 * only when nothing can mistake the new machine for the old one:
 * - no machine record holds it (a record goes only once the provider has deleted the machine);
 * - every listed member belongs to a machine record: a member whose record is gone (or a member list
 *   that cannot be read) may hold a freed ordinal's peer URL, and a new machine there would be taken
 *   for that member;
 * - it is not the init machine's: that name is recorded for good, and a new machine under it would be
 *   taken for the member that may bootstrap the cluster.
 * nextOrdinal stays a high-water mark (ordinals from it on were never used), so when reuse is not
 * safe the new machines get fresh ordinals.
 */
export function newOrdinals(view: ClusterView, count: number): number[] {
  const { observed, spec } = view;
  const used = new Set(observed.machines.map((m) => m.record.ordinal));
  const reuse = view.membersKnown && view.members.every((m) => view.machineOf(m) !== undefined);
  const free = (ordinal: number): boolean => !used.has(ordinal) && machineName(spec.name, ordinal) !== observed.initMachine;
  const ordinals: number[] = [];
  for (let ordinal = reuse ? 1 : observed.nextOrdinal; ordinals.length < count; ordinal++) {
    if (free(ordinal)) ordinals.push(ordinal);
  }
  return ordinals;
}

function machineName(cluster: string, ordinal: number): string {
  return `${cluster}-${String(ordinal)}`;
}

function serialMayCreate(step: Step, active: readonly ObservedMachine[]): boolean {
  const { view } = step;
  const settled = active.every((m) => isReadyVoter(view, m));
  // Departures are waited for only while some voter stays: when every voter is leaving or failed, the
  // last one cannot leave (LastVoter) before a new voter joins, so waiting would deadlock.
  const votersStay = view.voters.some((member) => {
    const machine = view.machineOf(member);
    return machine !== undefined && !isGone(step, machine);
  });
  const leavingMembers = votersStay && view.observed.machines.some((m) => isGone(step, m) && view.memberOf(m) !== undefined);
  if (settled && view.learners.length === 0 && !leavingMembers) return true;
  step.waits.push({ code: 'SerialWaitingForPrevious', message: 'serial strategy: waiting until every machine is a healthy voter before creating the next' });
  return false;
}

/** Machines to create now: a record whose provider call never happened, and the ones missing from the spec. */
export function creations(step: Step): CreateMachine[] {
  const { view } = step;
  const { spec, observed } = view;
  const actions: CreateMachine[] = [];
  // A record written before a crash, whose provider call never happened: create it again (idempotent).
  for (const m of observed.machines) {
    if (!m.infra && m.record.phase === 'Pending' && !isGone(step, m)) {
      const retry: CreateMachine = { kind: 'CreateMachine', machine: nameOf(m), ordinal: m.record.ordinal, version: m.record.version, reason: 'ResumeCreate' };
      if (m.record.failureDomain !== undefined) retry.failureDomain = m.record.failureDomain;
      actions.push(retry);
    }
  }
  const active = activeMachines(step);
  const rollingOut = active.some(view.isOutdated);
  const upToDate = active.filter((m) => !view.isOutdated(m)).length;
  const desired = spec.replicas + (rollingOut ? spec.maxSurge : 0);
  let need = Math.min(desired - active.length, spec.replicas - upToDate);
  if (need <= 0) return actions;
  const provisioning = active.filter((m) => !m.infra || m.infra.state === 'Provisioning').length;
  const room = spec.maxConcurrentProvisioning - provisioning;
  if (room < need) step.waits.push({ code: 'ProvisioningBound', message: `${String(provisioning)} machines provisioning (maxConcurrentProvisioning ${String(spec.maxConcurrentProvisioning)})` });
  need = Math.min(need, room);
  if (spec.strategy === 'serial') need = serialMayCreate(step, active) && provisioning === 0 ? Math.min(need, 1) : 0;
  const domains = spreadOverFailureDomains(spec.failureDomains, active.map((m) => m.record.failureDomain), need);
  const reason = rollingOut ? 'RollingOut' : active.length === 0 && observed.initMachine === undefined ? 'Initialize' : 'ScaleUp';
  newOrdinals(view, domains.length).forEach((ordinal, i) => {
    const domain = domains[i];
    const action: CreateMachine = { kind: 'CreateMachine', machine: machineName(spec.name, ordinal), ordinal, version: spec.version, reason };
    if (domain !== undefined) action.failureDomain = domain;
    actions.push(action);
  });
  return actions;
}


import type { MachineRecord } from '../domain/machine.ts';
import type { Decision, Observed, PlannerSpec } from '../planner/types.ts';
import { buildView } from '../planner/view.ts';
import type { StateStore } from '../ports/state-store.ts';

/**
 * Writes what this observation taught: phase transitions with their times (the timeline), member IDs,
 * addresses, how long a voter has been unhealthy and when a learner last made progress. Pure
 * bookkeeping; decisions stay in the planner.
 */
export function recordObservation(store: StateStore, cluster: string, spec: PlannerSpec, observed: Observed, decision: Decision, now: number): MachineRecord[] {
  const view = buildView(spec, observed, now);
  const changed: MachineRecord[] = [];
  store.transaction(() => {
    for (const machine of observed.machines) {
      const before = machine.record;
      const next: MachineRecord = { ...before, phaseTimes: { ...before.phaseTimes } };
      const phase = decision.phases[before.name] ?? before.phase;
      if (phase !== before.phase) {
        next.phase = phase;
        next.phaseTimes[phase] ??= now;
      }
      if (machine.infra) {
        next.address = machine.infra.address;
        next.clientURL = machine.infra.clientURL;
        next.peerURL = machine.infra.peerURL;
      }
      const member = view.membersKnown ? view.memberOf(machine) : undefined;
      if (member) {
        next.memberId = member.id;
        if (member.isLearner) {
          const applied = member.status?.ok ? member.status.status.raftAppliedIndex : undefined;
          if (applied !== undefined && applied !== before.learnerProgress?.appliedIndex) next.learnerProgress = { appliedIndex: applied, at: now };
        } else {
          delete next.learnerProgress;
          if (view.isHealthyVoter(member)) delete next.unhealthySince;
          else next.unhealthySince ??= now;
        }
      } else if (view.membersKnown) {
        delete next.unhealthySince;
      }
      if (JSON.stringify(next) !== JSON.stringify(before)) {
        store.putMachine(next);
        changed.push(next);
      }
    }
    const cp = store.getControlPlane(cluster);
    if (cp && cp.initializedAt === undefined && view.voters.length > 0) store.putControlPlane({ ...cp, initializedAt: now });
  });
  return changed;
}


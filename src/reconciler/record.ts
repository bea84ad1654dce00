import type { MachineRecord } from '../domain/machine.ts';
import type { Decision } from '../planner/types.ts';
import type { ClusterView } from '../planner/view.ts';
import type { StateStore } from '../ports/state-store.ts';

/**
 * Writes what this observation taught: phase transitions with their times (the timeline), member IDs,
 * addresses, how long a voter has been unhealthy and when a learner last made progress. Pure
 * bookkeeping; decisions stay in the planner.
 */
export function recordObservation(store: StateStore, cluster: string, view: ClusterView, decision: Decision): MachineRecord[] {
  const { observed, now } = view;
  const changed: MachineRecord[] = [];
  store.transaction(() => {
    for (const machine of observed.machines) {
      const before = machine.record;
      const next: MachineRecord = { ...before };
      // Compared field by field: this runs on every pass, and most passes change nothing.
      const edits = { count: 0 };
      const set = <K extends keyof MachineRecord>(key: K, value: MachineRecord[K] | undefined): void => {
        if (next[key] === value) return;
        edits.count++;
        if (value === undefined) Reflect.deleteProperty(next, key);
        else next[key] = value;
      };
      const phase = decision.phases[before.name] ?? before.phase;
      if (phase !== before.phase) {
        set('phase', phase);
        set('phaseTimes', { ...before.phaseTimes, [phase]: before.phaseTimes[phase] ?? now });
      }
      if (machine.infra) {
        set('address', machine.infra.address);
        set('clientURL', machine.infra.clientURL);
        set('peerURL', machine.infra.peerURL);
      }
      const member = view.membersKnown ? view.memberOf(machine) : undefined;
      if (member) {
        set('memberId', member.id);
        if (member.isLearner) {
          const applied = member.status?.ok ? member.status.status.raftAppliedIndex : undefined;
          if (applied !== undefined && applied !== before.learnerProgress?.appliedIndex) set('learnerProgress', { appliedIndex: applied, at: now });
        } else {
          set('learnerProgress', undefined);
          set('unhealthySince', view.isHealthyVoter(member) ? undefined : (before.unhealthySince ?? now));
        }
      } else if (view.membersKnown) {
        set('unhealthySince', undefined);
      }
      if (edits.count > 0) {
        store.putMachine(next);
        changed.push(next);
      }
    }
    const cp = store.getControlPlane(cluster);
    if (cp && cp.initializedAt === undefined && view.voters.length > 0) store.putControlPlane({ ...cp, initializedAt: now });
  });
  return changed;
}


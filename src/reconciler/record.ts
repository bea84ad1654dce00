import type { MachineRecord } from '../domain/machine.ts';
import type { Decision } from '../planner/types.ts';
import type { ClusterView } from '../planner/view.ts';
import { learnerAdvance } from '../planner/learner-progress.ts';
import type { StoreWrite } from '../ports/state-store.ts';

const RAFT_INDEX_REFRESH_MS = 5_000;

/**
 * What this observation taught, as writes: phase transitions with their times (the timeline), member
 * IDs, addresses, how long a voter has been unhealthy and when a learner last made progress. Pure
 * bookkeeping; decisions stay in the planner. Each machine's changes are a field patch, so they never
 * undo what an action wrote to another field meanwhile.
 */
export function observationWrites(
  view: ClusterView,
  decision: Decision,
  cp: { initializedAt?: number | undefined; highestRaftIndex?: number | undefined; lastPass?: { at: number } | undefined },
): { writes: StoreWrite[]; changed: MachineRecord[] } {
  const { observed, now } = view;
  const changed: MachineRecord[] = [];
  const writes: StoreWrite[] = [];
  {
    for (const machine of observed.machines) {
      const before = machine.record;
      const next: MachineRecord = { ...before };
      // Compared field by field: this runs on every pass, and most passes change nothing.
      const patch: Partial<MachineRecord> = {};
      const unset: (keyof MachineRecord)[] = [];
      const set = <K extends keyof MachineRecord>(key: K, value: MachineRecord[K] | undefined): void => {
        if (next[key] === value) return;
        if (value === undefined) {
          Reflect.deleteProperty(next, key);
          unset.push(key);
        } else {
          next[key] = value;
          patch[key] = value;
        }
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
          const advance = learnerAdvance(machine, member, now);
          if (advance) set('learnerProgress', advance);
        } else {
          set('learnerProgress', undefined);
          set('unhealthySince', view.isHealthyVoter(member) ? undefined : (before.unhealthySince ?? now));
        }
      } else if (view.membersKnown) {
        set('unhealthySince', undefined);
      }
      const apiserver = machine.infra?.components?.['kube-apiserver'];
      if (apiserver?.healthy === true) {
        set('apiserverReadyAt', before.apiserverReadyAt ?? now);
        set('apiserverUnhealthySince', undefined);
      } else if (apiserver !== undefined && before.apiserverReadyAt !== undefined) {
        set('apiserverUnhealthySince', before.apiserverUnhealthySince ?? now);
      }
      if (Object.keys(patch).length > 0 || unset.length > 0) {
        writes.push({ kind: 'PatchMachine', name: before.name, set: patch, unset });
        changed.push(next);
      }
    }
    if (cp.initializedAt === undefined && view.voters.length > 0) writes.push({ kind: 'PatchControlPlane', patch: { initializedAt: now } });
    // What `recover` compares a survivor against: entries past the survivor's index may be lost. A
    // cluster in use moves its index on every pass, so while a wait lasts (passes 100 ms apart, nothing
    // else to write) it is recorded at most every RAFT_INDEX_REFRESH_MS, not on every pass.
    const highest = Math.max(0, ...view.members.map((m) => (m.status?.ok === true ? m.status.status.raftIndex : 0)));
    const due = writes.length > 0 || decision.converged || cp.lastPass === undefined || now - cp.lastPass.at >= RAFT_INDEX_REFRESH_MS;
    if (highest > (cp.highestRaftIndex ?? 0) && due) writes.push({ kind: 'PatchControlPlane', patch: { highestRaftIndex: highest } });
  }
  return { writes, changed };
}


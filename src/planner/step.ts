import type { ObservedMachine, Wait } from './types.ts';
import type { ClusterView } from './view.ts';

/** Plan state shared by the steps of one plan() call. */
export interface Step {
  view: ClusterView;
  /** Machines failed before or in this decision, by name. */
  failed: Set<string>;
  /** Machines picked for deletion before or in this decision. */
  leaving: Set<string>;
  waits: Wait[];
  blocked?: Wait;
  /** What holds the next machine's join this pass (scale-up.ts), when one waits to join. */
  joinGate?: Wait[];
}

export const nameOf = (m: ObservedMachine): string => m.record.name;
export const byOrdinal = (a: ObservedMachine, b: ObservedMachine): number => a.record.ordinal - b.record.ordinal;

export function isGone(step: Step, machine: ObservedMachine): boolean {
  return step.failed.has(nameOf(machine)) || step.leaving.has(nameOf(machine));
}

export function activeMachines(step: Step): ObservedMachine[] {
  return step.view.observed.machines.filter((m) => !isGone(step, m));
}

export function isReadyVoter(view: ClusterView, machine: ObservedMachine): boolean {
  const member = view.memberOf(machine);
  return member !== undefined && view.isHealthyVoter(member);
}

import assert from 'node:assert/strict';
import { MEMBERSHIP_ACTIONS } from '../../src/bench/membership.ts';
import { plan } from '../../src/planner/plan.ts';
import type { ConditionType, Decision, MachineAction, Observed, PlannerSpec } from '../../src/planner/types.ts';
import { NOW, spec } from './observed.ts';

/** A version other than the default spec's, so the machines of `spec()` are outdated in a rollout. */
export const ROLLOUT_VERSION = '3.7.4';

/** The planner's decision on `o`, for the default spec at `NOW` unless told otherwise. */
export function decide(o: Observed, s: PlannerSpec = spec(), now = NOW): Decision {
  return plan(s, o, now);
}

/** Machine names of the machine actions of one kind, in decision order. */
export function machinesOf(d: Decision, kind: MachineAction['kind']): string[] {
  return d.machineActions.flatMap((a) => (a.kind === kind && 'machine' in a ? [a.machine] : []));
}

export function waitCodes(d: Decision): string[] {
  return d.waits.map((w) => w.code);
}

export function waitOf(d: Decision, code: string): Decision['waits'][number] {
  const w = d.waits.find((x) => x.code === code);
  assert.ok(w, `expected a ${code} wait, got ${JSON.stringify(d.waits)}`);
  return w;
}

export function conditionOf(d: Decision, type: ConditionType): Decision['conditions'][number] {
  const c = d.conditions.find((x) => x.type === type);
  assert.ok(c, `no ${type} condition`);
  return c;
}

/** Membership actions take the one slot per cluster: none may hide among the parallel machine actions. */
export function assertNoMembershipInMachineActions(d: Decision): void {
  for (const a of d.machineActions) assert.ok(!MEMBERSHIP_ACTIONS.has(a.kind), `membership action ${a.kind} among machine actions`);
}

import { keepsQuorum } from '../domain/quorum.ts';
import { catchUpBudget } from './catch-up-budget.ts';
import { guardAdd, guardPromotion } from './guard.ts';
import { preflightForAdd } from './preflight.ts';
import { activeMachines, byOrdinal, isGone, nameOf, type Step } from './step.ts';
import type { MembershipAction, ObservedMachine } from './types.ts';
import { isCaughtUp, learnerProgress, memberAnswers, statusErrors } from './view.ts';

function provisionedAt(m: ObservedMachine): number {
  return m.record.phaseTimes.Provisioned ?? m.record.createdAt;
}

function joinCandidates(step: Step): ObservedMachine[] {
  const { view } = step;
  return activeMachines(step)
    .filter((m) => m.infra?.state === 'Provisioned' && !m.infra.memberRunning && !view.memberOf(m))
    .sort((a, b) => Number(view.isOutdated(a)) - Number(view.isOutdated(b)) || provisionedAt(a) - provisionedAt(b) || byOrdinal(a, b));
}

export function scaleUp(step: Step): MembershipAction | undefined {
  const next = joinCandidates(step)[0];
  if (!next) return undefined;
  const reasons = [...preflightForAdd(step.view), ...guardAdd(step.view), ...catchUpBudget(step.view)];
  if (reasons.length > 0) {
    // A taken learner slot is the normal gate, reported by promote(); the rest explain the hold.
    step.waits.push(...reasons.filter((r) => r.code !== 'LearnerSlotTaken').map((r) => ({ ...r, message: `${nameOf(next)} waits at the join gate: ${r.message}` })));
    return undefined;
  }
  return { kind: 'AddLearner', machine: nameOf(next), reason: 'JoinNextMachine' };
}

export function promote(step: Step): MembershipAction | undefined {
  const { view } = step;
  for (const learner of view.learners) {
    const machine = view.machineOf(learner);
    if (!machine || isGone(step, machine)) continue;
    const name = nameOf(machine);
    const progress = learnerProgress(view, learner);
    if (!memberAnswers(learner) || !progress) {
      step.waits.push({ code: 'LearnerStarting', message: `waiting for learner ${name} to answer its status`, machine: name });
      continue;
    }
    const errors = statusErrors(learner);
    if (errors.length > 0) {
      step.waits.push({ code: 'LearnerReportsErrors', message: `learner ${name} reports ${errors.join('; ')}`, machine: name });
      continue;
    }
    if (!isCaughtUp(view, learner)) {
      step.waits.push({ code: 'LearnerCatchingUp', message: `waiting for learner ${name} to catch up (applied ${String(progress.applied)}/${String(progress.target)})`, machine: name });
      continue;
    }
    if (!keepsQuorum(view.voters.length, view.healthyVoters.length, 1, 1)) {
      step.waits.push({ code: 'QuorumWouldBreak', message: `promoting ${name} would leave too few healthy voters`, machine: name });
      continue;
    }
    const guard = guardPromotion(view, learner);
    if (guard.length > 0) {
      step.waits.push(...guard.map((w) => ({ ...w, machine: name })));
      continue;
    }
    return { kind: 'PromoteLearner', machine: name, memberId: learner.id, reason: 'LearnerCaughtUp' };
  }
  return undefined;
}

export function initialize(step: Step): MembershipAction | undefined {
  const first = activeMachines(step)
    .filter((m) => m.infra?.state === 'Provisioned')
    .sort((a, b) => provisionedAt(a) - provisionedAt(b) || byOrdinal(a, b))[0];
  if (!first) {
    step.waits.push({ code: 'WaitingForFirstMachine', message: 'no cluster yet: the first machine to finish provisioning initializes it' });
    return undefined;
  }
  return { kind: 'InitCluster', machine: nameOf(first), reason: 'FirstMachineProvisioned' };
}

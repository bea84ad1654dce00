import { keepsQuorum } from '../domain/quorum.ts';
import { guardAdd, guardPromotion } from './guard.ts';
import { preflightForAdd } from './preflight.ts';
import { activeMachines, byOrdinal, isGone, nameOf, type Step } from './step.ts';
import type { MembershipAction, ObservedMachine } from './types.ts';
import { isCaughtUp, learnerProgress, memberAnswers, statusErrors, type ClusterView } from './view.ts';

function provisionedAt(m: ObservedMachine): number {
  return m.record.phaseTimes.Provisioned ?? m.record.createdAt;
}

function joinCandidates(step: Step): ObservedMachine[] {
  const { view } = step;
  return activeMachines(step)
    .filter((m) => m.infra?.state === 'Provisioned' && !m.infra.memberRunning && !view.memberOf(m))
    .sort((a, b) => Number(view.isOutdated(a)) - Number(view.isOutdated(b)) || provisionedAt(a) - provisionedAt(b) || byOrdinal(a, b));
}

/** Learners added whose member was never started: each starts with the last add of its batch. */
export function unstartedLearners(view: ClusterView): ObservedMachine[] {
  return view.learners.flatMap((l) => {
    const machine = view.machineOf(l);
    const infra = machine?.infra;
    return machine && infra?.state === 'Provisioned' && !infra.memberRunning && infra.memberStartedAt === undefined ? [machine] : [];
  });
}

/** A machine is ready to join and the join gate is open: an add comes before any learner's start. */
export function addPossible(step: Step): boolean {
  return joinCandidates(step).length > 0 && preflightForAdd(step.view).length === 0 && guardAdd(step.view).length === 0;
}

export function scaleUp(step: Step): MembershipAction | undefined {
  const { view } = step;
  const candidates = joinCandidates(step);
  const next = candidates[0];
  if (!next) return undefined;
  const reasons = [...preflightForAdd(view), ...guardAdd(view)];
  if (reasons.length > 0) {
    // A taken learner slot is the normal gate, reported by promote(); the rest explain the hold.
    step.waits.push(...reasons.filter((r) => r.code !== 'LearnerSlotTaken').map((r) => ({ ...r, message: `${nameOf(next)} waits at the join gate: ${r.message}` })));
    return undefined;
  }
  // With parallel learners, every machine ready is added first and all start together with the last
  // add: each boots with the final membership, so none waits for another to name itself.
  const more = candidates.length > 1 && view.learners.length + 1 < view.learnerLimit;
  const waiting = unstartedLearners(view).map(nameOf);
  const start = more ? { deferStart: true as const } : waiting.length > 0 ? { alsoStart: waiting } : {};
  return { kind: 'AddLearner', machine: nameOf(next), reason: 'JoinNextMachine', ...start };
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

import { keepsQuorum, PEER_CONNECTED_FOR_ADD_MS } from '../domain/quorum.ts';
import { catchUpBudget } from './catch-up-budget.ts';
import { guardAdd, guardPromotion, isGuarded } from './guard.ts';
import { preflightForAdd, unstartedLearners } from './preflight.ts';
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
  step.joinGate = reasons;
  if (reasons.length > 0) {
    // A taken learner slot is the normal gate, reported by promote(); the rest explain the hold.
    step.waits.push(...reasons.filter((r) => r.code !== 'LearnerSlotTaken').map((r) => ({ ...r, message: `${nameOf(next)} waits at the join gate: ${r.message}` })));
    return undefined;
  }
  return { kind: 'AddLearner', machine: nameOf(next), reason: 'JoinNextMachine' };
}

/** A learner that has not named itself this long after its add is not waited for by promotions. */
const LEARNER_START_GRACE_MS = 10_000;

const addedAt = (machine: ObservedMachine): number | undefined => machine.record.phaseTimes.Learner;

/**
 * Join gates that lift within a pass or two on their own: a learner added but not yet named, and the
 * catch-up budget measuring a learner's rate. A taken learner slot is not one: it waits for a promotion.
 */
const PASSING_GATES: ReadonlySet<string> = new Set(['LearnerNotStarted', 'LeaderUplinkMeasuring']);

/**
 * Whether promoting `machine` now would make etcd refuse the next add for a few seconds, while that
 * add only waits for a gate that passes by itself (PASSING_GATES). etcd's add rule
 * (docs/etcd-behaviour.md, the 5 s rule) lets a one-voter cluster take adds at once, but once a
 * second voter exists it wants it connected for 5 s, and a learner's peer connection is as old as its
 * start. So during a bring-up, a learner added under 5 s ago is promoted after the pending add rather
 * than before it: the add would otherwise wait out the promoted member's 5 s, the promotion only the
 * gate. A promotion is never held past the learner's 5 s (the hold it saves), nor for a learner that
 * does not start, nor with etcd's check off (fastplane's guard then decides).
 */
function promotionHoldsNextAdd(step: Step, machine: ObservedMachine): boolean {
  const { view } = step;
  if (view.voters.length !== 1 || isGuarded(view)) return false;
  const gate = step.joinGate;
  if (gate === undefined || gate.length === 0 || gate.some((w) => !PASSING_GATES.has(w.code))) return false;
  const added = addedAt(machine);
  if (added === undefined || view.now - added >= PEER_CONNECTED_FOR_ADD_MS) return false;
  return unstartedLearners(view).every((l) => {
    const booting = view.machineOf(l);
    const since = booting === undefined ? undefined : addedAt(booting);
    return since !== undefined && view.now - since < LEARNER_START_GRACE_MS;
  });
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
    if (promotionHoldsNextAdd(step, machine)) {
      step.waits.push({ code: 'PromotionAfterPendingAdd', message: `promoting ${name} after the next add: with one voter etcd takes that add at once, with a second one connected under 5 s it would refuse it (etcd's 5 s rule)`, machine: name });
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

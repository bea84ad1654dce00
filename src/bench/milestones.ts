import type { Bound } from './critical-path-bound.ts';

/**
 * A run checked against its bound milestone by milestone, not only at the end: a run that is ahead at
 * any of them shows the bound's model or calibration wrong there, even when a slower later step hides
 * it in the total.
 */

/** What a run showed, in seconds from the start of the bound's own clock. */
export interface ObservedMilestones {
  /** The first member seen serving (a pass saw it a voter, or it accepted a learner add); null when the run started with voters. */
  initServingAt: number | null;
  /** Each PromoteLearner that succeeded, when it returned. */
  promotedAt: number[];
  /** Each learner's AddLearner sent to PromoteLearner done. */
  catchUps: { machine: string; seconds: number }[];
  /** With the Kubernetes control plane: each machine's kube-apiserver, when it was seen ready and how long from its start. */
  apiservers?: { machine: string; readyAt: number; startToReadySeconds: number | null }[];
}

export interface MilestoneAhead {
  milestone: string;
  observedSeconds: number;
  boundSeconds: number;
}

/**
 * The calibration polls every 20 ms and rounds to the millisecond: a run within this of its bound is
 * on it, not ahead.
 */
export const MILESTONE_RESOLUTION_SECONDS = 0.02;

const round = (s: number): number => Math.round(s * 1000) / 1000;

/**
 * The milestones at which the run was earlier than its bound allows: the init serving, each learner's
 * catch-up (against the calibrated join), the n-th promotion (against the bound's n-th) and, with the
 * Kubernetes control plane, the n-th apiserver ready (against the bound's n-th) and each apiserver's
 * start to ready (against the calibrated start, `apiserverSeconds`). Every figure is the critical
 * path's: the shared-CPU term bounds only when all the work is done, so the run's end is checked
 * against it (the bound's `seconds`), never a milestone.
 */
export function milestonesAhead(bound: Bound, joinSeconds: number, observed: ObservedMilestones, apiserverSeconds?: number): MilestoneAhead[] {
  const ahead: MilestoneAhead[] = [];
  const check = (milestone: string, observedSeconds: number, boundSeconds: number): void => {
    if (observedSeconds < boundSeconds - MILESTONE_RESOLUTION_SECONDS) ahead.push({ milestone, observedSeconds: round(observedSeconds), boundSeconds: round(boundSeconds) });
  };
  if (bound.initDoneAt !== null && observed.initServingAt !== null) check('init serving', observed.initServingAt, bound.initDoneAt);
  for (const c of observed.catchUps) check(`${c.machine} catch-up`, c.seconds, joinSeconds);
  const inOrder = (name: string, times: number[], due: number[]): void => {
    const sortedDue = [...due].sort((a, b) => a - b);
    [...times]
      .sort((a, b) => a - b)
      .forEach((at, i) => {
        const boundAt = sortedDue[i];
        if (boundAt !== undefined) check(`${name} ${String(i + 1)}`, at, boundAt);
      });
  };
  inOrder(
    'promotion',
    observed.promotedAt,
    bound.joins.map((j) => j.promotedAt),
  );
  // Every machine's apiserver is ready no sooner than its vote plus the calibrated start, so the n-th
  // one ready comes no sooner than the bound's n-th (the machines need not be the same ones).
  if (observed.apiservers !== undefined && bound.components !== undefined) {
    inOrder(
      'apiserver ready',
      observed.apiservers.map((a) => a.readyAt),
      bound.components.map((c) => c.apiserverReadyAt),
    );
    if (apiserverSeconds !== undefined) {
      for (const a of observed.apiservers) if (a.startToReadySeconds !== null) check(`${a.machine} apiserver start`, a.startToReadySeconds, apiserverSeconds);
    }
  }
  return ahead;
}

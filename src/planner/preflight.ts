import type { ObservedMember, Wait } from './types.ts';
import type { ClusterView } from './view.ts';

/**
 * Checks before adding a member: every voter answers with no errors and the same leader, no alarms,
 * a learner slot is free, and every learner already added has started and read the membership. etcd's
 * own 5 s peer-connection rule is not guessed here: a refusal ("unhealthy cluster") comes back as a
 * wait and the add is retried.
 */
export function preflightForAdd(view: ClusterView): Wait[] {
  const reasons: Wait[] = [];
  for (const voter of view.voters) {
    if (view.isHealthyVoter(voter)) continue;
    const machine = view.machineOf(voter);
    const who = machine?.record.name ?? `member ${voter.id}`;
    const why = voter.status?.ok === false ? voter.status.error : 'reports errors or no leader';
    reasons.push({ code: 'VoterUnhealthy', message: `voter ${who} is not healthy (${why})`, ...(machine ? { machine: machine.record.name } : {}) });
  }
  if (view.leaderId === undefined) reasons.push({ code: 'LeaderUnknown', message: 'voters do not agree on a leader' });
  for (const alarm of view.observed.alarms) {
    reasons.push({ code: 'AlarmActive', message: `etcd alarm ${alarm.alarm} is raised on member ${alarm.memberId}` });
  }
  if (view.learners.length >= view.learnerLimit) {
    const names = view.learners.map((l) => view.machineOf(l)?.record.name ?? l.id).join(', ');
    const lower = view.learnerLimit < view.spec.maxLearners ? `; members started before run ${String(view.learnerLimit)} until rolled` : '';
    reasons.push({ code: 'LearnerSlotTaken', message: `learner slot taken by ${names} (limit ${String(view.learnerLimit)}${lower})` });
    return reasons;
  }
  const unstarted = unstartedLearners(view);
  if (unstarted.length > 0) {
    reasons.push({ code: 'LearnerNotStarted', message: `learner ${learnerNames(view, unstarted)} has not started yet: another add now would change the membership it boots with` });
  }
  return reasons;
}

/**
 * Learners added but not named in the member list yet. A joining member checks its --initial-cluster
 * against the membership when it first boots and exits on any difference ("member count is unequal").
 * It names itself in the member list right after that check, well before it has caught up: an unnamed
 * learner still needs the membership it was given, so no add and no removal changes it meanwhile.
 */
export function unstartedLearners(view: ClusterView): ObservedMember[] {
  return view.learners.filter((l) => l.name === '');
}

export function learnerNames(view: ClusterView, learners: readonly ObservedMember[]): string {
  return learners.map((l) => view.machineOf(l)?.record.name ?? l.id).join(', ');
}

import type { LearnerProgress } from '../domain/machine.ts';
import type { ObservedMachine, ObservedMember } from './types.ts';

/**
 * What a learner shows of its catch-up now: its applied index once it answers its status, and the
 * bytes of its data dir, which grow while its snapshot arrives and it answers nothing. A learner is
 * judged by these, not by silence: on a slow shared link a snapshot takes longer than
 * learnerStuckAfter, and every learner receiving one would otherwise look stuck.
 */
function learnerShows(machine: ObservedMachine, member: ObservedMember): Omit<LearnerProgress, 'at'> {
  const applied = member.status?.ok === true ? member.status.status.raftAppliedIndex : undefined;
  const bytes = machine.infra?.memberRunning === true ? machine.infra.memberDataBytes : undefined;
  return { ...(applied === undefined ? {} : { appliedIndex: applied }), ...(bytes === undefined ? {} : { dataBytes: bytes }) };
}

/**
 * The progress to record when the learner shows more than its record last saw (its applied index
 * moved, or its data dir grew past the most it held), else undefined.
 */
export function learnerAdvance(machine: ObservedMachine, member: ObservedMember, now: number): LearnerProgress | undefined {
  const last = machine.record.learnerProgress;
  const shows = learnerShows(machine, member);
  const applied = shows.appliedIndex !== undefined && shows.appliedIndex !== last?.appliedIndex;
  const grew = shows.dataBytes !== undefined && shows.dataBytes > (last?.dataBytes ?? -1);
  if (!applied && !grew) return undefined;
  const appliedIndex = shows.appliedIndex ?? last?.appliedIndex;
  const dataBytes = Math.max(shows.dataBytes ?? -1, last?.dataBytes ?? -1);
  return { ...(appliedIndex === undefined ? {} : { appliedIndex }), ...(dataBytes < 0 ? {} : { dataBytes }), at: now };
}

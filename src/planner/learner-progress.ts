import type { LearnerProgress, LearnerReceive } from '../domain/machine.ts';
import type { ObservedMachine, ObservedMember } from './types.ts';

/** The shortest window a receive rate is taken over: shorter ones are mostly the jitter of the readings' times. */
export const RECEIVE_WINDOW_MS = 1_000;
/**
 * A data dir still for this long is not receiving: what it grows by next arrived at an unknown time
 * since. Twice the window, so a pass or two slowed by a loaded host does not end a receive.
 */
export const RECEIVE_QUIET_MS = 2_000;

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
 * The receive rate after a reading of `bytes` at `now` that grew the data dir (or is its first once
 * started). The first is only the baseline: etcd preallocates its WAL segments when the member starts
 * (docs/etcd-behaviour.md, "A learner's receive rate"), and that jump is no data received. After a
 * still spell the window restarts, so a wait before the snapshot does not dilute its rate.
 */
export function nextReceive(last: LearnerProgress | undefined, bytes: number, now: number): LearnerReceive {
  if (last?.receive === undefined) return { from: { bytes, at: now } };
  const prev = last.receive;
  const since = prev.since ?? now;
  if (now - last.at > RECEIVE_QUIET_MS) return { ...prev, from: { bytes, at: now }, since };
  if (now - prev.from.at < RECEIVE_WINDOW_MS) return { ...prev, since };
  const bytesPerSecond = ((bytes - prev.from.bytes) * 1000) / (now - prev.from.at);
  return { from: { bytes, at: now }, since, latest: { bytesPerSecond, from: prev.from.at }, peak: Math.max(prev.peak ?? 0, bytesPerSecond) };
}

/**
 * The progress to record when the learner shows more than its record last saw (its applied index
 * moved, or its data dir grew past the most it held), or when a started learner's data dir is read for
 * the first time (the baseline of its receive rate); else undefined. A learner is started once it is
 * named in the member list: etcd creates its WAL while it boots, before it publishes its name.
 */
export function learnerAdvance(machine: ObservedMachine, member: ObservedMember, now: number): LearnerProgress | undefined {
  const last = machine.record.learnerProgress;
  const shows = learnerShows(machine, member);
  const applied = shows.appliedIndex !== undefined && shows.appliedIndex !== last?.appliedIndex;
  const grew = shows.dataBytes !== undefined && shows.dataBytes > (last?.dataBytes ?? -1);
  const started = member.name !== '' && shows.dataBytes !== undefined;
  const baseline = started && last?.receive === undefined;
  if (!applied && !grew && !baseline) return undefined;
  const appliedIndex = shows.appliedIndex ?? last?.appliedIndex;
  const dataBytes = Math.max(shows.dataBytes ?? -1, last?.dataBytes ?? -1);
  const receive = started && (grew || baseline) ? nextReceive(last, dataBytes, now) : last?.receive;
  return {
    ...(appliedIndex === undefined ? {} : { appliedIndex }),
    ...(dataBytes < 0 ? {} : { dataBytes }),
    at: applied || grew ? now : (last?.at ?? now),
    ...(receive === undefined ? {} : { receive }),
  };
}

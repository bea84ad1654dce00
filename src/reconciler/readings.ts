import type { Observed, VoterReading } from '../planner/types.ts';

/**
 * The members' status readings a run keeps from pass to pass, so the planner (which stays pure) can
 * judge a guarded removal on readings spanning an election timeout. Bounded: at most one reading per
 * READING_SPACING_MS, none older than KEEP_MS.
 */
const READING_SPACING_MS = 100;
const KEEP_MS = 10_000;

export function readingOf(observed: Observed, at: number): VoterReading | undefined {
  if (!observed.members.ok) return undefined;
  const statuses: VoterReading['statuses'] = {};
  for (const member of observed.members.list) {
    if (member.status?.ok !== true) continue;
    const { leaderId, raftTerm, raftIndex } = member.status.status;
    statuses[member.id] = { leaderId, raftTerm, raftIndex };
  }
  return { at, statuses };
}

/** The readings to keep after this pass's one: passes closer than the spacing add nothing new. */
export function keepReadings(readings: readonly VoterReading[], reading: VoterReading | undefined): VoterReading[] {
  if (reading === undefined) return [...readings];
  const last = readings.at(-1);
  const kept = last !== undefined && reading.at - last.at < READING_SPACING_MS ? [...readings] : [...readings, reading];
  return kept.filter((r) => reading.at - r.at <= KEEP_MS);
}

/**
 * A rolling care job the reconcile loop carries on one step per pass (certificate renewal, scheduled
 * maintenance, NOSPACE recovery). Kept on the control-plane record, so the pass that continues it may
 * run in another process or on another host, and so `status --explain` can say what it waits for.
 */

export type CareJobKind = 'RenewCertificates' | 'RunMaintenance' | 'RecoverNoSpace';

/** How far a rolling job got through the voters: all its next step needs from the ones before. */
export interface RollingProgress {
  /** The cluster was healthy, with no learner joining, when the rolling part started. */
  started: boolean;
  /** Member IDs whose work ran and that were seen back. */
  done: string[];
  /** A member whose work ran and that has not been seen back yet. */
  awaiting?: string;
}

export const NOT_STARTED: RollingProgress = { started: false, done: [] };

export interface CareJobRecord {
  kind: CareJobKind;
  /** The planner's reason for starting it. */
  reason: string;
  startedAt: number;
  /** When a step last made progress: a job that waits longer than its patience since then fails. */
  progressAt: number;
  /** The part of the job the next step belongs to (each job names its own stages). */
  stage: string;
  rolling: RollingProgress;
  /** Only these member IDs take part in the rolling stage (maintenance: the fragmented members). */
  only?: string[];
  /** A NOSPACE alarm was raised when it started (all history compacted): it is disarmed at the end. */
  disarm?: boolean;
  /** Maintenance's settings, fixed when it starts. */
  retainRevisions?: number;
  fragmentationThreshold?: number;
  /** What the job did so far, one line per step that made progress: its event when it ends. */
  notes: string[];
  /** What the last step waits for, and when to ask again. */
  waiting?: { reason: string; message: string; retryAfterMs: number };
  /** Set once the job ended (a record field is never unset): then it is history, not work. */
  ended?: { at: number; ok: boolean; summary: string };
}

export function startCareJob(kind: CareJobKind, reason: string, now: number, settings: Pick<CareJobRecord, 'retainRevisions' | 'fragmentationThreshold'> = {}): CareJobRecord {
  return { kind, reason, startedAt: now, progressAt: now, stage: 'start', rolling: NOT_STARTED, notes: [], ...settings };
}

/** The job still to be carried on, if any. */
export function activeCareJob(job: CareJobRecord | undefined): CareJobRecord | undefined {
  return job !== undefined && job.ended === undefined ? job : undefined;
}

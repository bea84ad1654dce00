import { BlockedError } from './blocked-error.ts';
import type { CareJobRecord } from '../domain/care-job.ts';
import type { Clock } from '../ports/clock.ts';
import type { StepResult } from './steps.ts';

/** What every job's record keeps for the steps' driver: progress, notes, what it waits for, its end. */
export type JobRecord = Pick<CareJobRecord, 'progressAt' | 'notes' | 'waiting' | 'ended'>;

/**
 * One step of a care job over its record: the step's result and the record the next step starts
 * from. `note` takes what the step did, for the user (a command prints it, the loop keeps it on the
 * record for the job's event).
 */
export type JobStep<J extends JobRecord = CareJobRecord> = (job: J, note: (text: string) => void) => Promise<{ result: StepResult; job: J }>;

/** The record without what its last step waited for. */
function unwaited<J extends JobRecord>(job: J): J {
  const next = { ...job };
  delete next.waiting;
  return next;
}

function ended<J extends JobRecord>(job: J, at: number, ok: boolean, summary: string): J {
  return { ...unwaited(job), ended: { at, ok, summary } };
}

/**
 * What one reconcile pass does of a job: steps until one says "not now" (the record then says what it
 * waits for and when to ask again) or the job ends. A job that has waited `patienceMs` since its last
 * progress ends failed with what it waited for: waiting on would hold every later care job.
 */
export async function advanceJob<J extends JobRecord>(step: JobStep<J>, start: J, clock: Clock, patienceMs: number): Promise<J> {
  let job = start;
  for (;;) {
    const notes: string[] = [];
    const next = await step(job, (text) => notes.push(text));
    const now = clock.now();
    job = { ...next.job, notes: [...next.job.notes, ...notes] };
    const { result } = next;
    switch (result.kind) {
      case 'Done':
        return ended(job, now, true, result.summary);
      case 'Error':
        return ended(job, now, false, result.message);
      case 'Continue':
        job = { ...unwaited(job), progressAt: now };
        break;
      case 'RequeueAfter':
        if (now - job.progressAt >= patienceMs) return ended(job, now, false, result.message);
        return { ...job, waiting: { reason: result.reason, message: result.message, retryAfterMs: result.afterMs } };
    }
  }
}

/** A command's run of a job: its steps to the end, notes as they come; BlockedError when it fails. */
export async function driveJob<J extends JobRecord>(step: JobStep<J>, start: J, clock: Clock, patienceMs: number, onNote: (text: string) => void): Promise<J> {
  let job = start;
  for (;;) {
    const noted = job.notes.length;
    job = await advanceJob(step, job, clock, patienceMs);
    for (const text of job.notes.slice(noted)) onNote(text);
    if (job.ended) {
      if (!job.ended.ok) throw new BlockedError(job.ended.summary);
      return job;
    }
    await clock.sleep(job.waiting?.retryAfterMs ?? 0);
  }
}

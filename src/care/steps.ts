import type { Clock } from '../ports/clock.ts';
import { BlockedError } from './blocked-error.ts';

/**
 * How one step of a care job ended (etcd-druid's shape): a step does one bounded unit of work and
 * never sleeps to wait for the cluster; it says instead when to be asked again and why, so the
 * reconcile loop can run one step per pass between its reconciles, and a command can drive the steps
 * to the end (runSteps). Reasons are PascalCase codes (`LeaderUnknown`, `VoterNotBack`).
 */
export type StepResult =
  /** Progress made; the next step may run at once. */
  | { kind: 'Continue'; note: string }
  /** Not now: ask again after `afterMs`. */
  | { kind: 'RequeueAfter'; afterMs: number; reason: string; message: string }
  | { kind: 'Done'; summary: string }
  /** Waiting will not help. */
  | { kind: 'Error'; reason: string; message: string };

export type Step = () => Promise<StepResult>;

export const proceed = (note: string): StepResult => ({ kind: 'Continue', note });
export const requeueAfter = (afterMs: number, reason: string, message: string): StepResult => ({ kind: 'RequeueAfter', afterMs, reason, message });
export const done = (summary: string): StepResult => ({ kind: 'Done', summary });
export const failed = (reason: string, message: string): StepResult => ({ kind: 'Error', reason, message });

/**
 * Drives `step` until it is Done, sleeping between RequeueAfter results; returns the summary. An Error,
 * or a RequeueAfter once the steps have said "not now" for `patienceMs` since the start or the last
 * Continue, ends it as a BlockedError with that result's message.
 */
export async function runSteps(step: Step, clock: Clock, patienceMs: number, onContinue?: (note: string) => void): Promise<string> {
  let deadline = clock.now() + patienceMs;
  for (;;) {
    const result = await step();
    switch (result.kind) {
      case 'Done':
        return result.summary;
      case 'Error':
        throw new BlockedError(result.message);
      case 'Continue':
        onContinue?.(result.note);
        deadline = clock.now() + patienceMs;
        break;
      case 'RequeueAfter':
        if (clock.now() >= deadline) throw new BlockedError(result.message);
        await clock.sleep(result.afterMs);
    }
  }
}

import type { RemediationRecord } from './machine.ts';

/**
 * The remediation record once `machine` is remediated at `now`, with KCP's counting: a failure within
 * minHealthyPeriod of the last remediation is a retry of the same sequence; a later one starts anew.
 */
export function nextRemediation(last: RemediationRecord | undefined, machine: string, now: number, minHealthyPeriodMs: number): RemediationRecord {
  const retry = last !== undefined && now - last.at < minHealthyPeriodMs;
  return { machine, at: now, retryCount: retry ? last.retryCount + 1 : 0 };
}

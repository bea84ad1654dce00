import { compareVersions } from '../api/versions.ts';

/** What `maxLearners: auto` runs members with from etcd 3.6 on: the most the setting allows. */
export const AUTO_LEARNER_LIMIT = 8;

/**
 * The --max-learners a member of `version` runs with for the spec's setting, never below `kept` (a
 * limit it ran before, kept by a restart in place). etcd 3.4 and 3.5 allow one learner, hard-coded; 3.6
 * made it a flag (docs/etcd-behaviour.md, learner limit).
 */
export function launchedLearnerLimit(version: string, setting: 'auto' | number, kept = 1): number {
  if (compareVersions(version, '3.6.0') < 0) return 1;
  return Math.max(setting === 'auto' ? AUTO_LEARNER_LIMIT : setting, kept);
}

/**
 * The learner limit in force: the lowest of what new members will run (`launched`) and what every
 * member with a process runs, since each member checks an add against its own limit when it applies
 * it. A member's record keeps the limit it was started with (launchedLearnerLimit: 1 below 3.6); one
 * recorded before its limit was (an older fastplane) counts as 1.
 */
export function learnerLimitInForce(launched: number, members: readonly { maxLearners?: number | undefined }[]): number {
  return Math.min(launched, ...members.map((member) => member.maxLearners ?? 1));
}

import type { LeaseGuard, MaintainOptions } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin, EtcdAlarm } from '../ports/etcd-admin.ts';
import type { EtcdMaintenance } from '../ports/etcd-maintenance.ts';
import type { JobStep } from './care-job.ts';
import { healthyVoters, oneVoterAtATime, rollingStep, type VoterHealth } from './rolling.ts';
import { done, proceed } from './steps.ts';

export interface MaintainDeps {
  admin: EtcdAdmin;
  maintenance: EtcdMaintenance;
  endpoints: readonly string[];
  lease: LeaseGuard;
  clock: Clock;
  healthTimeoutMs: number;
  onNote: (text: string) => void;
}

export interface MaintainReport {
  /** The revision history was compacted up to, when it was. */
  compactedTo?: number;
  /** Members defragmented, in order, with the bytes each backend file had before and after. */
  defragmented: { member: string; before: number; after: number }[];
  disarmed: EtcdAlarm[];
  /** Why each step ran (or did not), for the user. */
  reasons: string[];
}

function fragmentation(dbSize: number, dbSizeInUse: number): number {
  return dbSize === 0 ? 0 : (dbSize - dbSizeInUse) / dbSize;
}

/** What maintenance found before it defragments: the NOSPACE alarms, and the members to defragment. */
interface Survey {
  nospace: EtcdAlarm[];
  fragmented: string[];
  compactedTo?: number;
}

/** Compaction to the retained window (all history under a NOSPACE alarm), and which members are fragmented. */
async function compactAndSurvey(deps: MaintainDeps, options: MaintainOptions, note: (text: string) => void): Promise<Survey> {
  const nospace = (await deps.admin.alarms(deps.endpoints)).filter((alarm) => alarm.alarm === 'NOSPACE');
  const health = await healthyVoters(deps.admin, deps.endpoints);
  const leader = health.voters.find((v) => v.member.id === health.leaderId);
  const { revision } = await deps.maintenance.usage(leader?.endpoint ?? deps.endpoints[0] ?? '');
  const target = nospace.length > 0 ? revision : revision - options.retainRevisions;
  const survey: Survey = { nospace, fragmented: [] };
  await deps.lease.verify();
  if (target > 1) {
    await deps.maintenance.compact(deps.endpoints, target);
    survey.compactedTo = target;
    note(nospace.length > 0 ? `NOSPACE alarm: compacted all history up to revision ${String(target)}` : `compacted history up to revision ${String(target)}, keeping the last ${String(options.retainRevisions)} revisions`);
  } else {
    note(`history is within the ${String(options.retainRevisions)} retained revisions: no compaction`);
  }
  for (const voter of health.voters) {
    const usage = await deps.maintenance.usage(voter.endpoint);
    const share = fragmentation(usage.dbSize, usage.dbSizeInUse);
    if (nospace.length > 0 || share >= options.fragmentationThreshold) survey.fragmented.push(voter.member.id);
    else note(`${voter.member.name}: ${String(Math.round(share * 100))}% free pages, below the threshold: not defragmented`);
  }
  return survey;
}

async function defragment(deps: MaintainDeps, voter: VoterHealth, note: (text: string) => void): Promise<{ member: string; before: number; after: number }> {
  const before = (await deps.maintenance.usage(voter.endpoint)).dbSize;
  await deps.maintenance.defragment(voter.endpoint);
  const after = (await deps.maintenance.usage(voter.endpoint)).dbSize;
  note(`defragmented ${voter.member.name}: ${String(before)} -> ${String(after)} bytes`);
  return { member: voter.member.name, before, after };
}

/** Disarms the NOSPACE alarms still raised: only once space is free again does disarming help. */
async function disarm(deps: MaintainDeps, alarms: readonly EtcdAlarm[], note: (text: string) => void): Promise<void> {
  for (const alarm of alarms) {
    await deps.lease.verify();
    await deps.maintenance.disarm(deps.endpoints, alarm);
    note(`disarmed the NOSPACE alarm of member ${alarm.memberId}`);
  }
}

/**
 * One round of care: compaction to the retained window, defragmentation of fragmented members one at a
 * time (followers first, the leader last after moving leadership away, the cluster healthy between),
 * and recovery from a NOSPACE alarm: compact everything, defragment every member, then disarm.
 */
export async function maintain(deps: MaintainDeps, options: MaintainOptions): Promise<MaintainReport> {
  const report: MaintainReport = { defragmented: [], disarmed: [], reasons: [] };
  const note = (text: string): void => {
    report.reasons.push(text);
    deps.onNote(text);
  };
  const survey = await compactAndSurvey(deps, options, note);
  if (survey.compactedTo !== undefined) report.compactedTo = survey.compactedTo;
  await oneVoterAtATime(deps.admin, deps.endpoints, { clock: deps.clock, healthTimeoutMs: deps.healthTimeoutMs, beforeEach: () => deps.lease.verify(), only: new Set(survey.fragmented) }, async (voter) => {
    report.defragmented.push(await defragment(deps, voter, note));
  });
  await disarm(deps, survey.nospace, note);
  report.disarmed.push(...survey.nospace);
  return report;
}

/**
 * One step of maintenance as the reconcile loop runs it: compaction and the survey, then one member's
 * defragmentation (or one look whether it is back), then, when it started under a NOSPACE alarm (all
 * history compacted), the NOSPACE alarms disarmed.
 */
export function maintenanceStep(deps: MaintainDeps, options: MaintainOptions): JobStep {
  return async (job, note) => {
    if (job.stage === 'start') {
      const { fragmented, nospace } = await compactAndSurvey(deps, options, note);
      return { result: proceed('compacted'), job: { ...job, stage: 'defragment', only: fragmented, disarm: nospace.length > 0 } };
    }
    if (job.stage === 'defragment') {
      const work = async (voter: VoterHealth): Promise<void> => {
        await defragment(deps, voter, note);
      };
      const { result, progress } = await rollingStep({ admin: deps.admin, endpoints: deps.endpoints, beforeEach: () => deps.lease.verify(), only: new Set(job.only), work }, job.rolling);
      return { result: result.kind === 'Done' ? proceed(result.summary) : result, job: { ...job, rolling: progress, ...(result.kind === 'Done' ? { stage: 'disarm' } : {}) } };
    }
    if (job.disarm === true) await disarm(deps, (await deps.admin.alarms(deps.endpoints)).filter((alarm) => alarm.alarm === 'NOSPACE'), note);
    return { result: done(`${String(job.rolling.done.length)} members defragmented`), job };
  };
}

import { activeCareJob, startCareJob, type CareJobRecord } from '../domain/care-job.ts';
import type { ControlPlaneRecord } from '../domain/machine.ts';
import type { ControlPlanePatch } from '../domain/record-writes.ts';
import type { CareAction, RecoverNoSpace, RenewCertificates, RunMaintenance } from '../planner/types.ts';
import type { CarePort, DowngradeWork } from '../ports/care.ts';
import { endsTheRun, type ExecutorDeps } from './executor-deps.ts';

// Care actions: day-2 jobs through the CarePort, each dated on the record it belongs to.

/** What a care handler returns for a pass in which its job only waited: no event (one comes when it ends). */
export const STILL_RUNNING = Symbol('StillRunning');

function carePort(deps: ExecutorDeps): CarePort {
  if (!deps.care) throw new Error('no day-2 care is wired for this control plane');
  return deps.care;
}

const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/**
 * A scheduled backup, its outcome recorded on the control plane either way, since the next slot counts
 * from the attempt: a failed backup is the BackupFailing condition until a good one clears it.
 */
async function takeBackup(deps: ExecutorDeps, keep: number): Promise<string> {
  const at = deps.clock.now();
  await deps.writer.verify();
  let line: string;
  try {
    line = await carePort(deps).takeBackup(keep);
  } catch (error) {
    if (endsTheRun(error)) throw error;
    await deps.writer.commit({ kind: 'PatchControlPlane', patch: { lastBackupAttempt: { at, ok: false, message: messageOf(error) } } });
    throw error;
  }
  await deps.writer.commit({ kind: 'PatchControlPlane', patch: { lastBackupAttempt: { at, ok: true, message: line } } });
  return line;
}

/**
 * This pass's share of a rolling job: the one on record carried on, or a new one. The record keeps
 * where it got, so the next pass (in this process or another) goes on from there; a step that throws
 * ends the job (the planner starts a new one if it is still due). Scheduled maintenance's outcome is
 * recorded as a backup's is, dated when the job ended: the next slot counts from there, so a job that
 * takes longer than `every` is not followed by another at once.
 */
async function carryOnJob(deps: ExecutorDeps, cp: ControlPlaneRecord, action: RenewCertificates | RunMaintenance | RecoverNoSpace): Promise<string | typeof STILL_RUNNING> {
  const onRecord = activeCareJob(cp.careJob);
  const settings = action.kind === 'RunMaintenance' ? { retainRevisions: action.retainRevisions, fragmentationThreshold: action.fragmentationThreshold } : {};
  const job = onRecord?.kind === action.kind ? onRecord : startCareJob(action.kind, action.reason, deps.clock.now(), settings);
  await deps.writer.verify();
  let next: CareJobRecord;
  try {
    next = await carePort(deps).advanceJob(deps.writer, job);
  } catch (error) {
    if (endsTheRun(error)) throw error;
    next = { ...job, ended: { at: deps.clock.now(), ok: false, summary: messageOf(error) } };
  }
  const patch: ControlPlanePatch = { careJob: next };
  const { ended } = next;
  const told = [...next.notes, ...(ended ? [ended.summary] : [])].join('; ');
  if (ended && action.kind === 'RunMaintenance') patch.lastMaintenance = { at: ended.at, ok: ended.ok, message: told };
  await deps.writer.commit({ kind: 'PatchControlPlane', patch });
  if (!ended) {
    deps.failpoint('after-care-step');
    return STILL_RUNNING;
  }
  if (!ended.ok) throw new Error(told);
  return told;
}

export async function runCareAction(deps: ExecutorDeps, cp: ControlPlaneRecord, action: CareAction): Promise<string | typeof STILL_RUNNING> {
  switch (action.kind) {
    case 'TakeBackup':
      return takeBackup(deps, action.keep);
    case 'RenewCertificates':
    case 'RecoverNoSpace':
    case 'RunMaintenance':
      return carryOnJob(deps, cp, action);
    case 'DowngradeCluster':
    case 'CancelDowngrade': {
      const work: DowngradeWork = action.kind === 'DowngradeCluster' ? { kind: 'downgrade', version: action.version } : { kind: 'cancel' };
      return (await carePort(deps).downgrade(deps.writer, work)).join('; ');
    }
  }
}

import type { CareAction } from '../planner/types.ts';
import type { CarePort } from '../ports/care.ts';
import { launchedLearnerLimit } from '../domain/learner-limit.ts';
import { machineTemplateHash } from '../planner/spec.ts';
import { controlPlane, endsTheRun, type ExecutorDeps } from './executor-deps.ts';

// Care actions: day-2 jobs through the CarePort, each dated on the record it belongs to.

function carePort(deps: ExecutorDeps): CarePort {
  if (!deps.care) throw new Error('no day-2 care is wired for this control plane');
  return deps.care;
}

/**
 * A scheduled care job (a backup, maintenance), its outcome recorded on the control plane either way,
 * since the next slot counts from the attempt: a failed backup is the BackupFailing condition until a
 * good one clears it.
 */
async function runScheduled(deps: ExecutorDeps, field: 'lastBackupAttempt' | 'lastMaintenance', job: () => Promise<string>): Promise<string> {
  const at = deps.clock.now();
  await deps.writer.verify();
  let line: string;
  try {
    line = await job();
  } catch (error) {
    if (endsTheRun(error)) throw error;
    const message = error instanceof Error ? error.message : String(error);
    await deps.writer.commit({ kind: 'PatchControlPlane', patch: { [field]: { at, ok: false, message } } });
    throw error;
  }
  await deps.writer.commit({ kind: 'PatchControlPlane', patch: { [field]: { at, ok: true, message: line } } });
  return line;
}

export async function runCareAction(deps: ExecutorDeps, action: CareAction): Promise<string> {
  switch (action.kind) {
    case 'TakeBackup':
      return runScheduled(deps, 'lastBackupAttempt', () => carePort(deps).takeBackup(action.keep));
    case 'RenewCertificates':
      return `renewed ${(await carePort(deps).renewCertificates(deps.writer)).join(', ')}`;
    case 'RecoverNoSpace':
      return (await carePort(deps).recoverNoSpace(deps.writer)).join('; ');
    case 'DowngradeCluster': {
      // A restart records itself (member-launch.ts); a machine whose member already runs the target
      // (a rerun) is recorded here (fenced): the version, and the spec's template.
      const { manifest } = await controlPlane(deps);
      const template = { templateHash: machineTemplateHash(manifest), maxLearners: launchedLearnerLimit(action.version, manifest.spec.etcd.maxLearners) };
      const record = (machine: string, version: string): Promise<void> => deps.writer.commit({ kind: 'PatchMachine', name: machine, set: { version, ...template } });
      return (await carePort(deps).downgrade(deps.writer, action.version, record)).join('; ');
    }
    case 'CancelDowngrade':
      return (await carePort(deps).cancelDowngrade(deps.writer)).join('; ');
    case 'RunMaintenance': {
      const options = { retainRevisions: action.retainRevisions, fragmentationThreshold: action.fragmentationThreshold };
      return runScheduled(deps, 'lastMaintenance', async () => (await carePort(deps).maintain(deps.writer, options)).join('; '));
    }
  }
}

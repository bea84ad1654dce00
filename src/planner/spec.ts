import type { ControlPlane } from '../api/control-plane.ts';
import { parseDuration } from '../api/duration.ts';
import { launchedLearnerLimit } from '../domain/learner-limit.ts';
import { templateHash } from '../domain/template.ts';
import type { PlannerSpec } from './types.ts';

function ms(text: string): number {
  // The schema has already checked every duration; 0 only guards the type.
  return parseDuration(text) ?? 0;
}

/** The fields whose change needs new machines (a rollout) besides the version. */
export function machineTemplateHash(cp: ControlPlane): string {
  // The check mode is an etcd flag, so changing it rolls the members; left out at its default so the
  // hash of every cluster made before the mode existed stays the same (no surprise rollout).
  const guarded = cp.spec.etcd.reconfigurationCheck === 'fastplane' ? { reconfigurationCheck: 'fastplane' } : {};
  // Kubernetes runs on the machine beside its member: a new version is new machines (a rollout). Left
  // out when off, so an etcd-only cluster's hash stays what it was.
  const kubernetes = cp.spec.kubernetes === undefined ? {} : { kubernetes: cp.spec.kubernetes.version };
  return templateHash({ provider: cp.spec.provider.name, quotaBackendBytes: cp.spec.etcd.quotaBackendBytes, maxLearners: launchedLearnerLimit(cp.spec.version, cp.spec.etcd.maxLearners), ...guarded, ...kubernetes });
}

/**
 * The template a member started at `version` with `maxLearners` runs: the spec's, unless it keeps a
 * higher learner limit than the spec's at that version (a restart in place), and then none: the rollout
 * still replaces it.
 */
export function templateRunBy(cp: ControlPlane, member: { version: string; maxLearners: number }): string | undefined {
  const spec = machineTemplateHash(cp);
  return member.maxLearners === launchedLearnerLimit(member.version, cp.spec.etcd.maxLearners) ? spec : undefined;
}

export function toPlannerSpec(cp: ControlPlane): PlannerSpec {
  const { spec } = cp;
  const remediation: PlannerSpec['remediation'] = {
    maxRetry: spec.remediation.maxRetry,
    retryPeriodMs: ms(spec.remediation.retryPeriod),
    minHealthyPeriodMs: ms(spec.remediation.minHealthyPeriod),
    unhealthyAfterMs: ms(spec.remediation.unhealthyAfter),
    learnerStuckAfterMs: ms(spec.remediation.learnerStuckAfter),
  };
  const backup = spec.backup === undefined ? {} : { backup: { everyMs: ms(spec.backup.every), keep: spec.backup.keep } };
  const maintenance = {
    everyMs: ms(spec.maintenance.every),
    retainRevisions: spec.maintenance.retainRevisions,
    fragmentationThreshold: spec.maintenance.fragmentationThreshold,
  };
  return {
    ...backup,
    ...(spec.kubernetes === undefined ? {} : { kubernetes: { version: spec.kubernetes.version } }),
    maintenance,
    name: cp.metadata.name,
    replicas: spec.replicas,
    version: spec.version,
    templateHash: machineTemplateHash(cp),
    failureDomains: spec.provider.failureDomains,
    strategy: spec.scaleUp.strategy,
    maxConcurrentProvisioning: spec.scaleUp.maxConcurrentProvisioning,
    maxLearners: launchedLearnerLimit(spec.version, spec.etcd.maxLearners),
    paceCatchUps: spec.etcd.maxLearners === 'auto',
    reconfigurationCheck: spec.etcd.reconfigurationCheck,
    maxSurge: spec.rollout.maxSurge,
    remediation,
  };
}

import type { ControlPlaneStatus } from '../api/control-plane-status.ts';
import { compareVersions } from '../api/versions.ts';
import type { StatusBody } from '../ports/control-plane-objects.ts';
import type { ControlPlaneStatusDocument } from '../reconciler/status.ts';

/**
 * A ControlPlane object's status (the status subresource) from the status document `fastplane status`
 * prints: the same conditions with the same reasons, as metav1.Conditions in Cluster API's v1beta2
 * shape (each with the observedGeneration it was set for), and the replica counters by v1beta2's
 * meaning (replicas: machines whatever their state). Nothing is computed again here.
 */

type ObjectCondition = NonNullable<ControlPlaneStatus['conditions']>[number];

/** What the controller knows of an object beside the status document. */
export interface ObjectStatusInput {
  /** The object's metadata.generation the controller acted on (applied, or refused). */
  generation: number;
  /** The status document of its control plane; undefined while none is on record. */
  document: ControlPlaneStatusDocument | undefined;
  /** The CLI's words for a spec it refuses (not applied): Available False, reason InvalidSpec. */
  invalid?: readonly string[] | undefined;
  /** Set while the finalizer tears the machines down: Deleting True with what is being done. */
  deleting?: string | undefined;
  /** The conditions written last, so a condition that keeps its status keeps its lastTransitionTime. */
  previous: readonly ObjectCondition[] | undefined;
  now: number;
}

export const INVALID_SPEC_REASON = 'InvalidSpec';

/** metav1.Time is whole seconds in RFC 3339. */
const seconds = (iso: string): string => iso.replace(/\.\d+Z$/, 'Z');

function reasonOrStatus(reason: string, status: string): string {
  return reason === '' ? status : reason;
}

export function objectStatus(input: ObjectStatusInput): ControlPlaneStatus {
  const { generation, document, invalid, deleting, previous, now } = input;
  const previousByType = new Map((previous ?? []).map((c) => [c.type, c]));
  const since = (type: string, status: string, fallback: string): string => {
    const before = previousByType.get(type);
    return before !== undefined && before.status === status ? before.lastTransitionTime : seconds(fallback);
  };
  const own = (type: string, status: ObjectCondition['status'], reason: string, message: string): ObjectCondition => ({
    type,
    status,
    reason,
    message,
    lastTransitionTime: since(type, status, new Date(now).toISOString()),
    observedGeneration: generation,
  });
  const conditions: ObjectCondition[] = (document?.status.conditions ?? []).map((c) => {
    const status = c.status === 'True' || c.status === 'False' ? c.status : 'Unknown';
    return { type: c.type, status, reason: reasonOrStatus(c.reason, status), message: c.message, lastTransitionTime: since(c.type, status, c.lastTransitionTime), observedGeneration: generation };
  });
  const replace = (condition: ObjectCondition): void => {
    const at = conditions.findIndex((c) => c.type === condition.type);
    if (at >= 0) conditions[at] = condition;
    else conditions.unshift(condition);
  };
  if (invalid !== undefined) replace(own('Available', 'False', INVALID_SPEC_REASON, invalid.join('; ')));
  else if (document === undefined) replace(own('Available', 'False', 'NotCreated', 'no control plane on record yet'));
  if (deleting !== undefined) replace(own('Deleting', 'True', 'Deleting', deleting));
  const status: ControlPlaneStatus = { observedGeneration: generation, conditions };
  if (document === undefined) return status;
  const { machines } = document.status;
  const spec = document.spec;
  const upToDate = machines.filter((m) => m.version === spec.version && (spec.kubernetes === undefined || m.kubernetesVersion === spec.kubernetes.version));
  const lowest = machines.map((m) => m.version).sort(compareVersions)[0];
  return {
    observedGeneration: generation,
    replicas: machines.length,
    readyReplicas: document.status.readyReplicas,
    upToDateReplicas: upToDate.length,
    voters: document.status.voters,
    learners: document.status.learners,
    ...(lowest === undefined ? {} : { version: lowest }),
    conditions,
  };
}

/** Whether two statuses say the same: the controller writes only what changed (no write per pass). */
export function sameStatus(a: StatusBody | undefined, b: StatusBody): boolean {
  return a !== undefined && JSON.stringify(a) === JSON.stringify(b);
}

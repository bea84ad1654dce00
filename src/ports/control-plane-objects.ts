/**
 * ControlPlane objects (or Cluster API's KubeadmControlPlanes) on a management cluster's API server,
 * as the controller sees them: a watch that delivers every object again after each (re-)list, and the
 * few writes the controller makes (finalizers, the status subresource, Events). The Kubernetes adapter implements it with
 * @kubernetes/client-node; tests may implement it in memory.
 */

/** Which object: a namespaced name and the uid that tells a recreated object from the old one. */
export interface ObjectRef {
  namespace: string;
  name: string;
  uid: string;
}

export interface ControlPlaneObject extends ObjectRef {
  /** metadata.generation: bumped by the API server on every spec change. */
  generation: number;
  resourceVersion: string;
  finalizers: string[];
  /** metadata.annotations (a KubeadmControlPlane opts in with one). */
  annotations?: Readonly<Record<string, string>>;
  /** metadata.deletionTimestamp is set: `kubectl delete` waits for the finalizers. */
  deleting: boolean;
  /** The object's spec as stored (the CRD's schema and defaults applied), not yet checked by the CLI's schema. */
  spec: unknown;
}

/** An events.k8s.io/v1 Event about an object. */
export interface ObjectEvent {
  type: 'Normal' | 'Warning';
  /** CamelCase, at most 128 characters: what happened (the action). */
  reason: string;
  /** What the controller did or failed to do (the action, or the reason when there was none). */
  action: string;
  note: string;
  at: number;
}

/** The status subresource's content, in the object kind's own shape. */
export type StatusBody = Readonly<Record<string, unknown>>;

export interface ObjectWatch {
  close(): void;
}

export interface ControlPlaneObjects {
  /**
   * Calls `onObject` with every object soon after it changes, and again with every object after each
   * list (the first, after a watch error or a 410 Gone, and periodically); `onTrouble` says why the
   * watch was restarted.
   */
  watch(onObject: (object: ControlPlaneObject) => void, onTrouble: (message: string) => void): ObjectWatch;
  /** Sets metadata.finalizers, only if the object is still at `object.resourceVersion` (else ConflictError). */
  setFinalizers(object: ControlPlaneObject, finalizers: string[]): Promise<void>;
  /** Replaces the status through the status subresource. */
  writeStatus(ref: ObjectRef, status: StatusBody): Promise<void>;
  recordEvent(ref: ObjectRef, event: ObjectEvent): Promise<void>;
  /** What this identity may not do of what the controller needs: `verb resource` each (empty when everything is allowed). */
  missingPermissions(): Promise<string[]>;
}

/** The API server refused a write for lack of permission (RBAC): the controller cannot work without it. */
export class ForbiddenError extends Error {
  override name = 'ForbiddenError';
}

/** The object changed since it was read (a resourceVersion precondition failed): read it again. */
export class ConflictError extends Error {
  override name = 'ConflictError';
}

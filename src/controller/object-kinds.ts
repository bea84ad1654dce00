import type { ControlPlaneStatus } from '../api/control-plane-status.ts';
import type { ControlPlaneObject, StatusBody } from '../ports/control-plane-objects.ts';
import type { ControlPlaneStatusDocument } from '../reconciler/status.ts';

/**
 * What differs between the kinds of object the controller reconciles (fastplane's ControlPlane,
 * Cluster API's KubeadmControlPlane): which objects it takes, the ControlPlane spec an object means,
 * and the status in the kind's own shape. Everything else (finalizer, store, Events) is the same pass.
 */
export interface ObjectKind {
  /** The kind, for messages. */
  readonly kind: string;
  /** Whether the controller reconciles the object; it never writes the others. */
  manages(object: ControlPlaneObject): boolean;
  /** The ControlPlane spec to store and what the conversion noted; InvalidInputError when the object cannot be one. */
  specOf(object: ControlPlaneObject): { spec: unknown; notes: readonly string[] };
  /** The status subresource's content from the status computed for every kind (object-status.ts). */
  statusBody(status: ControlPlaneStatus, document: ControlPlaneStatusDocument | undefined): StatusBody;
}

/** fastplane's ControlPlane objects: every one, its spec as it is, its status as computed. */
export const CONTROL_PLANE_KIND: ObjectKind = {
  kind: 'ControlPlane',
  manages: () => true,
  specOf: (object) => ({ spec: object.spec, notes: [] }),
  statusBody: (status) => status,
};

import { stringify } from 'yaml';
import { CRD_GROUP, CRD_PLURAL } from './crd.ts';
import { KCP_GROUP, KCP_PLURAL } from './kcp/kubeadm-control-plane.ts';

/**
 * The controller's identity on a management cluster and its least privilege: exactly the calls
 * `fastplane controller --kubeconfig` makes (the informer's list and watch, merge patches of the
 * finalizers and of the status subresource, Events), nothing else; the same on Cluster API's
 * KubeadmControlPlanes for `--kubeadm-control-planes` (a rule on a resource no CRD defines grants
 * nothing). The controller checks what it uses at start with SelfSubjectAccessReviews, which every
 * authenticated identity may create.
 */

export const CONTROLLER_NAMESPACE = 'fastplane-system';
export const CONTROLLER_ACCOUNT = 'fastplane-controller';
export const CONTROLLER_ROLE = 'fastplane-controller';

export interface Permission {
  /** The API group ('' for the core group). */
  group: string;
  /** `resource` or `resource/subresource`. */
  resource: string;
  verbs: readonly string[];
}

/** What the controller needs for ControlPlane objects, and for the Events on any object. */
export const CONTROL_PLANE_PERMISSIONS: readonly Permission[] = [
  { group: CRD_GROUP, resource: CRD_PLURAL, verbs: ['list', 'watch', 'patch'] },
  { group: CRD_GROUP, resource: `${CRD_PLURAL}/status`, verbs: ['patch'] },
  { group: 'events.k8s.io', resource: 'events', verbs: ['create'] },
];

/** What it needs beside those for KubeadmControlPlane objects: no scale, which only `kubectl scale` uses. */
export const KCP_PERMISSIONS: readonly Permission[] = [
  { group: KCP_GROUP, resource: KCP_PLURAL, verbs: ['list', 'watch', 'patch'] },
  { group: KCP_GROUP, resource: `${KCP_PLURAL}/status`, verbs: ['patch'] },
];

/** The ClusterRole's permissions. */
export const CONTROLLER_PERMISSIONS: readonly Permission[] = [...CONTROL_PLANE_PERMISSIONS, ...KCP_PERMISSIONS];

/** The rules of the controller's ClusterRole, one per group and resource. */
export function controllerRules(permissions: readonly Permission[] = CONTROLLER_PERMISSIONS): Record<string, unknown>[] {
  return permissions.map((p) => ({ apiGroups: [p.group], resources: [p.resource], verbs: [...p.verbs] }));
}

/** The Namespace, ServiceAccount, ClusterRole and ClusterRoleBinding `fastplane install` applies. */
export function controllerRbacObjects(): Record<string, unknown>[] {
  return [
    { apiVersion: 'v1', kind: 'Namespace', metadata: { name: CONTROLLER_NAMESPACE } },
    { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: CONTROLLER_ACCOUNT, namespace: CONTROLLER_NAMESPACE } },
    { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: CONTROLLER_ROLE }, rules: controllerRules() },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: CONTROLLER_ROLE },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: CONTROLLER_ROLE },
      subjects: [{ kind: 'ServiceAccount', name: CONTROLLER_ACCOUNT, namespace: CONTROLLER_NAMESPACE }],
    },
  ];
}

/** The RBAC objects as one YAML stream, as deploy/rbac/ holds them. */
export function renderRbac(): string {
  return `# Generated from src/api/rbac.ts by \`npx tsx scripts/crds.ts\`; do not edit.\n${controllerRbacObjects()
    .map((object) => stringify(object, { lineWidth: 0 }))
    .join('---\n')}`;
}

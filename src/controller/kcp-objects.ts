import type { ControlPlaneStatus } from '../api/control-plane-status.ts';
import { convertKubeadmControlPlane, KCP_GROUP, KCP_KIND, KCP_VERSION, MANAGE_ANNOTATION } from '../api/kcp/kubeadm-control-plane.ts';
import { compareVersions } from '../api/versions.ts';
import type { ControlPlaneObject, StatusBody } from '../ports/control-plane-objects.ts';
import type { ControlPlaneStatusDocument } from '../reconciler/status.ts';
import type { ObjectKind } from './object-kinds.ts';
import { TEARDOWN_FINALIZER } from './object-sync.ts';

/**
 * Cluster API's KubeadmControlPlane objects (v1beta2) as the controller reconciles them: only those
 * annotated `fastplane.dev/manage: "true"`, each converted by `fastplane convert`'s converter, with
 * the status written in KCP v1beta2's fields (docs/management-cluster.md lists them).
 */

/** fastplane's condition types that KCP names otherwise; the others (Available, ScalingUp, ...) are KCP's names already. */
const KCP_CONDITION_TYPES: Readonly<Record<string, string>> = { UpToDate: 'MachinesUpToDate' };

/**
 * A KCP's status: replicas counts machines whatever their state, as v1beta2 does; a machine whose
 * member is a healthy voter is ready and available. `version` and `versions` are the machines'
 * Kubernetes versions (none for a control plane that runs etcd only); `deprecated.v1beta1` keeps the
 * counters v1beta1 clients read.
 */
export function kcpStatus(status: ControlPlaneStatus, document: ControlPlaneStatusDocument | undefined): StatusBody {
  const conditions = (status.conditions ?? []).map((c) => ({ ...c, type: KCP_CONDITION_TYPES[c.type] ?? c.type }));
  const body: Record<string, unknown> = { observedGeneration: status.observedGeneration, conditions };
  if (document === undefined || status.replicas === undefined) return body;
  const replicas = status.replicas;
  const ready = status.readyReplicas ?? 0;
  const upToDate = status.upToDateReplicas ?? 0;
  const perVersion = new Map<string, number>();
  for (const machine of document.status.machines) {
    if (machine.kubernetesVersion !== undefined) perVersion.set(machine.kubernetesVersion, (perVersion.get(machine.kubernetesVersion) ?? 0) + 1);
  }
  const versions = [...perVersion.keys()].sort(compareVersions).map((version) => ({ version: `v${version}`, replicas: perVersion.get(version) ?? 0 }));
  Object.assign(body, { replicas, readyReplicas: ready, availableReplicas: ready, upToDateReplicas: upToDate });
  if (versions[0] !== undefined) Object.assign(body, { version: versions[0].version, versions });
  // A merge patch keeps what it does not name, so once initialized it stays so, as in Cluster API.
  if (ready > 0) body.initialization = { controlPlaneInitialized: true };
  body.deprecated = { v1beta1: { readyReplicas: ready, updatedReplicas: upToDate, unavailableReplicas: replicas - ready } };
  return body;
}

/** The KubeadmControlPlane kind, converting with the etcd and Kubernetes versions installed here. */
export function kubeadmControlPlaneKind(installedEtcd: () => readonly string[], installedKubernetes: () => readonly string[]): ObjectKind {
  return {
    kind: KCP_KIND,
    // One that has the finalizer stays managed without the annotation, so its deletion still tears the machines down.
    manages: (object: ControlPlaneObject) => object.annotations?.[MANAGE_ANNOTATION] === 'true' || object.finalizers.includes(TEARDOWN_FINALIZER),
    specOf: (object) => {
      const doc = { apiVersion: `${KCP_GROUP}/${KCP_VERSION}`, kind: KCP_KIND, metadata: { name: object.name }, spec: object.spec };
      const converted = convertKubeadmControlPlane(doc, installedEtcd(), installedKubernetes());
      return { spec: converted.manifest.spec, notes: [...converted.notes, ...converted.warnings.map((w) => `warning: ${w}`)] };
    },
    statusBody: kcpStatus,
  };
}

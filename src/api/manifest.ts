import { parseManifestText, readManifestFile, validateControlPlane, type ControlPlane } from './control-plane.ts';
import { convertKubeadmControlPlane, isKubeadmControlPlane } from './kcp/kubeadm-control-plane.ts';

/** A manifest as given with -f: fastplane's own ControlPlane, or a Cluster API KubeadmControlPlane converted. */
export interface LoadedManifest {
  manifest: ControlPlane;
  /** The kind the file held. */
  kind: 'ControlPlane' | 'KubeadmControlPlane';
  /** How a KubeadmControlPlane's fields were mapped; empty for a ControlPlane. */
  notes: string[];
  /** Fields set but not used, with why; empty for a ControlPlane (which refuses unknown fields). */
  warnings: string[];
}

/**
 * Reads a manifest file of either kind. `installedEtcd` and `installedKubernetes` are asked only for a
 * KubeadmControlPlane, whose Kubernetes version maps to the nearest etcd and Kubernetes installed here.
 */
export function loadManifestFile(path: string, installedEtcd: () => readonly string[], installedKubernetes: () => readonly string[] = () => []): LoadedManifest {
  const doc = parseManifestText(readManifestFile(path), path);
  if (isKubeadmControlPlane(doc)) return { kind: 'KubeadmControlPlane', ...convertKubeadmControlPlane(doc, installedEtcd(), installedKubernetes()) };
  return { kind: 'ControlPlane', manifest: validateControlPlane(doc), notes: [], warnings: [] };
}

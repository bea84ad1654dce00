import { listEtcdVersions } from '../adapters/etcd/etcd-binaries.ts';
import { listKubernetesVersions } from '../adapters/kubernetes/kubernetes-binaries.ts';
import { loadManifestFile, type LoadedManifest } from '../api/manifest.ts';

/**
 * `-f FILE` for every command that takes one: a ControlPlane, or a KubeadmControlPlane converted with
 * the etcd and Kubernetes versions installed here. The mapping and every ignored field go to stderr, so stdout keeps
 * only the command's result.
 */
export function loadManifestForCli(path: string): LoadedManifest {
  const loaded = loadManifestFile(path, listEtcdVersions, listKubernetesVersions);
  for (const note of loaded.notes) process.stderr.write(`${loaded.kind} ${path}: ${note}\n`);
  for (const warning of loaded.warnings) process.stderr.write(`warning: ${warning}\n`);
  return loaded;
}

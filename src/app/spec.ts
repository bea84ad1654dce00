import type { ControlPlane } from '../api/control-plane.ts';
import { InvalidInputError } from '../api/errors.ts';
import { validateKubernetesChange } from '../api/kubernetes.ts';
import { validateVersionChange } from '../api/version-change.ts';
import type { Runtime } from './runtime.ts';

/**
 * Whether `manifest` may be stored over what is on record: bad input (exit 2) before anything is
 * recorded or started when it changes what cannot change, skips a version, or names a version this
 * host has no binaries for.
 */
export async function checkSpecChange(runtime: Runtime, manifest: ControlPlane): Promise<void> {
  const name = manifest.metadata.name;
  const stored = (await runtime.store.getControlPlane(name))?.manifest;
  // Members' URLs and certificates are fixed when their machines are created: http and https
  // members cannot form one cluster.
  if (stored !== undefined && stored.spec.provider.insecure !== manifest.spec.provider.insecure) {
    throw new InvalidInputError([`spec.provider.insecure: cannot change on an existing control plane (it is ${String(stored.spec.provider.insecure)}); run fastplane down ${name} first`]);
  }
  const running = (await runtime.store.listMachines(name)).map((m) => m.version);
  const versionError = stored && validateVersionChange(stored.spec.version, manifest.spec.version, running);
  if (versionError !== undefined) throw new InvalidInputError([versionError]);
  const kubernetesError = validateKubernetesChange(stored?.spec.kubernetes?.version, manifest.spec.kubernetes?.version);
  if (kubernetesError !== undefined) throw new InvalidInputError([kubernetesError]);
  runtime.checkBinaries(manifest);
}

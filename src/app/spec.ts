import { API_VERSION, ControlPlaneSchema, describeIssues, KIND, type ControlPlane } from '../api/control-plane.ts';
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

/** How storing a spec ended: its generation in the store, or the CLI's words for why it was refused. */
export type SpecApplied = { applied: true; manifest: ControlPlane; generation: number; changed: boolean } | { applied: false; problems: readonly string[] };

/**
 * Stores a spec that came as data (a ControlPlane object's spec on a management cluster): the CLI's
 * schema and checks first, then a new generation when it changed, which the store's spec watch hands
 * to the controller's work queue. A refusal is returned with the CLI's words, never thrown.
 */
export async function applySpec(runtime: Runtime, name: string, spec: unknown, now: number): Promise<SpecApplied> {
  const parsed = ControlPlaneSchema.safeParse({ apiVersion: API_VERSION, kind: KIND, metadata: { name }, spec });
  if (!parsed.success) return { applied: false, problems: describeIssues(parsed.error) };
  try {
    await checkSpecChange(runtime, parsed.data);
  } catch (error) {
    if (error instanceof InvalidInputError) return { applied: false, problems: error.problems };
    throw error;
  }
  const stored = await runtime.store.applySpec(parsed.data, now);
  return { applied: true, manifest: parsed.data, generation: stored.record.generation, changed: stored.changed };
}

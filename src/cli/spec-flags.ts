import { resolve } from 'node:path';
import { defaultControlPlane, validateControlPlane, type ControlPlane } from '../api/control-plane.ts';
import { parseDuration, parseDurationRange } from '../api/duration.ts';
import { InvalidInputError } from '../api/errors.ts';
import { checkSpecChange } from '../app/spec.ts';
import type { CliContext } from './context.ts';
import { loadManifestForCli } from './manifest-file.ts';

/** The flags that name and shape a control plane (up, scale, rollout, restore), checked into a manifest. */
export interface SpecFlags {
  file?: string;
  name?: string;
  replicas?: string;
  version?: string;
  etcdBinaries?: string;
  /** spec.kubernetes.version */
  kubernetes?: string;
  kubernetesBinaries?: string;
  strategy?: string;
  provisioningDelay?: string;
  insecure?: boolean;
  reconfigurationCheck?: string;
  /** `auto` or a number: spec.etcd.maxLearners. */
  maxLearners?: string;
}

export interface RunFlags {
  timeout: string;
  output: string;
}

export function parseTimeout(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0) throw new InvalidInputError([`--timeout: must be a positive duration such as 90s or 10m, got ${text}`]);
  return ms;
}

function parseReplicas(text: string): number {
  if (!/^-?\d+$/.test(text)) throw new InvalidInputError([`--replicas: must be a whole number, got ${text}`]);
  return Number(text);
}

/**
 * The desired state from a file, the stored spec or defaults, with flags applied on top; the result is
 * validated as a whole so every message names the manifest field. A flag that names a different
 * control plane than the file is a contradiction, not an override.
 */
export async function resolveManifest(ctx: CliContext, flags: SpecFlags): Promise<ControlPlane> {
  let base: ControlPlane;
  // Built from defaults alone: its etcd version was never chosen, so --kubernetes may choose it.
  let fresh = false;
  if (flags.file !== undefined) {
    base = loadManifestForCli(flags.file).manifest;
    if (flags.name !== undefined && flags.name !== base.metadata.name) {
      throw new InvalidInputError([`--name ${flags.name} contradicts metadata.name ${base.metadata.name} in ${flags.file}`]);
    }
  } else {
    if (flags.name === undefined) throw new InvalidInputError(['give -f FILE or --name NAME']);
    const stored = (await ctx.store.getControlPlane(flags.name))?.manifest;
    fresh = stored === undefined;
    base = stored ?? defaultControlPlane(flags.name);
  }
  const spec: Record<string, unknown> = { ...base.spec };
  const provider: Record<string, unknown> = { ...base.spec.provider };
  const etcd: Record<string, unknown> = { ...base.spec.etcd };
  if (flags.replicas !== undefined) spec.replicas = parseReplicas(flags.replicas);
  if (flags.kubernetes !== undefined || flags.kubernetesBinaries !== undefined) {
    const kubernetes: Record<string, unknown> = { ...base.spec.kubernetes };
    if (flags.kubernetes !== undefined) kubernetes.version = flags.kubernetes;
    if (flags.kubernetesBinaries !== undefined) kubernetes.binaries = resolve(flags.kubernetesBinaries);
    spec.kubernetes = kubernetes;
    // A new control plane runs the etcd kubeadm pairs with its Kubernetes, unless --version names one.
    if (fresh && flags.version === undefined) delete spec.version;
  }
  if (flags.version !== undefined) spec.version = flags.version;
  if (flags.strategy !== undefined) spec.scaleUp = { ...base.spec.scaleUp, strategy: flags.strategy };
  if (flags.reconfigurationCheck !== undefined) {
    if (flags.reconfigurationCheck !== 'etcd' && flags.reconfigurationCheck !== 'fastplane') {
      throw new InvalidInputError([`--reconfiguration-check: must be etcd or fastplane, got ${flags.reconfigurationCheck}`]);
    }
    etcd.reconfigurationCheck = flags.reconfigurationCheck;
  }
  if (flags.etcdBinaries !== undefined) etcd.binaries = resolve(flags.etcdBinaries);
  if (flags.maxLearners !== undefined) etcd.maxLearners = flags.maxLearners === 'auto' ? 'auto' : Number(flags.maxLearners);
  if (flags.provisioningDelay !== undefined) {
    if (parseDurationRange(flags.provisioningDelay) === undefined) {
      throw new InvalidInputError([`--provisioning-delay: must be a duration (8s) or a range (3s-8s), got ${flags.provisioningDelay}`]);
    }
    provider.provisioningDelay = flags.provisioningDelay;
  }
  if (flags.insecure === true) provider.insecure = true;
  const manifest = validateControlPlane({ ...base, spec: { ...spec, etcd, provider } });
  await checkSpecChange(ctx, manifest);
  return manifest;
}

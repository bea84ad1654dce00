import { InvalidInputError } from '../../api/errors.ts';
import type { CliContext } from '../context.ts';
import { reconcileAndReport } from '../reconcile.ts';
import { storedManifest } from '../../app/records.ts';
import { resolveManifest, type RunFlags, type SpecFlags } from '../spec-flags.ts';

interface RolloutFlags extends RunFlags {
  version?: string;
  etcdBinaries?: string;
  kubernetesVersion?: string;
  kubernetesBinaries?: string;
}

/** `rollout NAME --version V` and/or `--kubernetes-version K`: a new generation of a stored control plane at other versions. */
export async function rolloutCommand(ctx: CliContext, name: string, flags: RolloutFlags): Promise<number> {
  if (flags.version === undefined && flags.kubernetesVersion === undefined) throw new InvalidInputError(['give --version (etcd) or --kubernetes-version, or both']);
  await storedManifest(ctx, name);
  const spec: SpecFlags = { name };
  if (flags.version !== undefined) spec.version = flags.version;
  if (flags.etcdBinaries !== undefined) spec.etcdBinaries = flags.etcdBinaries;
  if (flags.kubernetesVersion !== undefined) spec.kubernetes = flags.kubernetesVersion;
  if (flags.kubernetesBinaries !== undefined) spec.kubernetesBinaries = flags.kubernetesBinaries;
  return reconcileAndReport(ctx, await resolveManifest(ctx, spec), flags);
}

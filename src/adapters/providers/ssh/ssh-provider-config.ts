import { existsSync } from 'node:fs';
import type { ControlPlane } from '../../../api/control-plane.ts';
import { parseDuration, parseDurationRange } from '../../../api/duration.ts';
import { InvalidInputError } from '../../../api/errors.ts';
import { etcdBinaryFinder } from '../../etcd/etcd-binaries.ts';
import type { ProviderEnvironment } from '../provider-environment.ts';
import { SshProvider } from './ssh-provider.ts';

const DEFAULT_BASE_DIR = '/var/lib/fastplane';

/**
 * The ssh provider for a control plane, from its spec. Files named in the spec must exist before
 * anything is done: a missing key is bad input (exit 2, naming the field), not a failed machine.
 */
export function sshProviderFor(manifest: ControlPlane, env: ProviderEnvironment): SshProvider {
  const spec = manifest.spec.provider;
  const problems: string[] = [];
  const file = (field: 'identityFile' | 'knownHostsFile'): string => {
    const path = spec[field];
    if (path === undefined) problems.push(`spec.provider.${field}: is required for provider ssh`);
    else if (!existsSync(path)) problems.push(`spec.provider.${field}: ${path} does not exist`);
    return path ?? '';
  };
  const identityFile = file('identityFile');
  const knownHostsFile = file('knownHostsFile');
  for (const [version, path] of Object.entries(spec.etcdBinaries ?? {})) {
    if (!existsSync(path)) problems.push(`spec.provider.etcdBinaries.${version}: ${path} does not exist`);
  }
  if (problems.length > 0) throw new InvalidInputError(problems);
  const binaries = spec.etcdBinaries ?? {};
  const installed = etcdBinaryFinder(manifest.spec.etcd.binaries);
  return new SshProvider({
    stateDir: env.stateDir,
    hosts: spec.hosts ?? [],
    identityFile,
    knownHostsFile,
    baseDir: spec.baseDir ?? DEFAULT_BASE_DIR,
    findBinary: (version) => binaries[version] ?? installed(version),
    version: manifest.spec.version,
    store: env.store,
    provisioningDelay: parseDurationRange(spec.provisioningDelay) ?? { minMs: 0, maxMs: 0 },
    ...(spec.endpoint === undefined || manifest.spec.kubernetes === undefined ? {} : { endpoint: spec.endpoint }),
    ...(spec.provision === undefined
      ? {}
      : { provision: { create: spec.provision.create, ...(spec.provision.delete === undefined ? {} : { delete: spec.provision.delete }), timeoutMs: parseDuration(spec.provision.timeout) ?? 600_000 } }),
  });
}

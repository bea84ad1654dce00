import type { ControlPlane } from '../../../api/control-plane.ts';
import { parseDurationRange } from '../../../api/duration.ts';
import { etcdBinaryFinder } from '../../etcd/etcd-binaries.ts';
import type { ProviderEnvironment } from '../provider-environment.ts';
import { LocalProcessProvider } from './local-process-provider.ts';

/** The local provider for a control plane, from its spec and the process's environment. */
export function localProviderFor(manifest: ControlPlane, env: ProviderEnvironment): LocalProcessProvider {
  const { provisioningDelay, deletionDelay, insecure } = manifest.spec.provider;
  return new LocalProcessProvider({
    stateDir: env.stateDir,
    addressPrefix: env.addressPrefix,
    provisioningDelay: parseDurationRange(provisioningDelay) ?? { minMs: 0, maxMs: 0 },
    deletionDelay: parseDurationRange(deletionDelay) ?? { minMs: 0, maxMs: 0 },
    findBinary: etcdBinaryFinder(manifest.spec.etcd.binaries),
    insecure,
    honourFailureMarker: env.provisioningFailureMarker,
    store: env.store,
    certValidityMs: env.certValidityMs,
  });
}

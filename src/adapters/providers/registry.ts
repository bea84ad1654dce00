import type { ControlPlane } from '../../api/control-plane.ts';
import type { MachineProvider } from '../../ports/machine-provider.ts';
import type { ProviderEnvironment } from './provider-environment.ts';
import { localProviderFor } from './local/local-provider-config.ts';
import { sshProviderFor } from './ssh/ssh-provider-config.ts';

type ProviderFactory = (manifest: ControlPlane, env: ProviderEnvironment) => MachineProvider;

/** One line per provider, keyed by `spec.provider.name`: adding a provider is a folder and a line here. */
const PROVIDERS: Record<ControlPlane['spec']['provider']['name'], ProviderFactory> = {
  'local-process': localProviderFor,
  ssh: sshProviderFor,
};

/** The control plane's provider, built from its spec. */
export function providerFor(manifest: ControlPlane, env: ProviderEnvironment): MachineProvider {
  return PROVIDERS[manifest.spec.provider.name](manifest, env);
}

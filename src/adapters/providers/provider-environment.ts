import type { StateStore } from '../../ports/state-store.ts';

/** What every provider may draw on besides the spec: the state dir, the record store, test settings. */
export interface ProviderEnvironment {
  stateDir: string;
  store: StateStore;
  /** First two octets of the local provider's loopback addresses. */
  addressPrefix: string;
  /** Tests only: the local provider honours a machine's `provisioning-failed` file. */
  provisioningFailureMarker: boolean;
  /** Tests only: certificates issued with this lifetime. */
  certValidityMs: number | undefined;
}

/** The scope of a provider's documents of a cluster in the record store (its StoredClusterState). */
export function stateScope(provider: string, cluster: string): string {
  return `${provider}/${cluster}`;
}

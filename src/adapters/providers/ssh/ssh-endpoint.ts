import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import type { SshEndpoint } from '../../../api/ssh-provider.ts';
import type { ControlPlaneEndpoint } from '../../../ports/machine-provider.ts';
import { CheckedEndpoint } from '../../endpoint/checked-endpoint.ts';
import { HaproxyEndpoint } from '../../endpoint/haproxy-endpoint.ts';
import type { HaproxyHost } from '../../endpoint/haproxy-host.ts';
import { APISERVER_PORT } from '../../kubernetes/kubeconfig.ts';
import { kubernetesClusterFiles } from '../../pki/pki-files.ts';
import type { StoredClusterState } from '../../stored-cluster-state.ts';
import type { SshConnections } from './ssh-connections.ts';
import { sshHaproxyHost } from './ssh-haproxy-host.ts';

const ROUTES = 'endpoint/routes';

/** What placing a cluster's endpoint needs of the provider. */
export interface SshEndpointPlace {
  ssh: SshConnections;
  /** The folder below which the endpoint host keeps `endpoints/<cluster>/` (the provider's baseDir). */
  baseDir: string;
  state: (cluster: string) => StoredClusterState;
}

/**
 * The control-plane endpoint of an ssh cluster, as its manifest names it: HAProxy on the endpoint host
 * (`<baseDir>/endpoints/<cluster>/` there, bound to port 6443 of the host's address), or the user's
 * own load balancer, only checked (checked-endpoint.ts), the machines it should route to recorded in
 * the record store.
 */
export async function sshEndpoint(spec: SshEndpoint, place: SshEndpointPlace, cluster: string): Promise<ControlPlaneEndpoint> {
  const state = place.state(cluster);
  if (spec.host === undefined) {
    const address = spec.loadBalancer ?? '';
    return new CheckedEndpoint(
      /:\d+$/.test(address) ? address : `${address}:${String(APISERVER_PORT)}`,
      {
        read: async () => (await state.readRecord<{ machines: string[] }>(ROUTES))?.machines,
        write: (machines) => state.writeRecord(ROUTES, { machines }),
      },
      () => kubernetesCa(state),
    );
  }
  // The endpoint's writers take turns on fastplane's side: a lock file beside this host's copy of the cluster.
  const lockDir = join(state.cacheDir, 'endpoint');
  await mkdir(lockDir, { recursive: true, mode: 0o700 });
  const host: HaproxyHost = sshHaproxyHost(place.ssh, spec.host, lockDir);
  return new HaproxyEndpoint({ dir: `${place.baseDir}/endpoints/${cluster}`, address: `${spec.host.address}:${String(APISERVER_PORT)}`, host });
}

/** The cluster's Kubernetes CA certificate as stored, in a snapshot on this host: what the apiservers' certificates are checked against. */
export function kubernetesCa(state: StoredClusterState): Promise<string> {
  return state.readFiles((root) => Promise.resolve(kubernetesClusterFiles(root).ca.cert));
}

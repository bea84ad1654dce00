import type { MemberLaunch } from '../../ports/infra-provider.ts';
import type { MemberTlsFiles } from './local/pki-files.ts';

/**
 * The etcd command line of a member, shared by every provider that runs etcd itself (local processes,
 * hosts over SSH): the same flags wherever the process runs, only the paths differ.
 */

/** etcd 3.6's default: the log is compacted sooner, so a new learner gets a snapshot, not a long replay. */
export const DEFAULT_SNAPSHOT_COUNT = 10_000;

export function versionAtLeast(version: string, major: number, minor: number): boolean {
  const [maj = 0, min = 0] = version.split('.').map(Number);
  return maj > major || (maj === major && min >= minor);
}

export interface MemberPlacement {
  clientURL: string;
  peerURL: string;
  dataDir: string;
  /** Certificate paths as the member sees them; undefined for plain http (debugging only). */
  tls?: MemberTlsFiles;
  snapshotCount?: number;
}

export function memberFlags(placement: MemberPlacement, launch: MemberLaunch): string[] {
  const { clientURL, peerURL, dataDir, tls } = placement;
  const args = [
    '--name', launch.memberName,
    '--data-dir', dataDir,
    '--listen-client-urls', clientURL,
    '--advertise-client-urls', clientURL,
    '--listen-peer-urls', peerURL,
    '--initial-advertise-peer-urls', peerURL,
    '--initial-cluster', launch.initialCluster,
    '--initial-cluster-state', launch.initialClusterState,
    '--initial-cluster-token', launch.clusterToken,
    '--snapshot-count', String(placement.snapshotCount ?? DEFAULT_SNAPSHOT_COUNT),
  ];
  // 3.4/3.5 know no such flag and would refuse to start.
  if (versionAtLeast(launch.version, 3, 6)) args.push('--max-learners', String(launch.maxLearners));
  if (launch.quotaBackendBytes !== undefined) args.push('--quota-backend-bytes', String(launch.quotaBackendBytes));
  if (launch.forceNewCluster === true) args.push('--force-new-cluster');
  if (launch.strictReconfigCheck === false) args.push('--strict-reconfig-check=false');
  // 3.4 defaults to the deprecated capnslog logger and warns about it; 3.5 already logs with zap.
  if (!versionAtLeast(launch.version, 3, 5)) args.push('--logger', 'zap', '--log-outputs', 'stderr');
  if (tls !== undefined) {
    args.push(
      '--cert-file', tls.certFile,
      '--key-file', tls.keyFile,
      '--trusted-ca-file', tls.caFile,
      '--client-cert-auth',
      '--peer-cert-file', tls.peerCertFile,
      '--peer-key-file', tls.peerKeyFile,
      '--peer-trusted-ca-file', tls.caFile,
      '--peer-client-cert-auth',
    );
  }
  return args;
}

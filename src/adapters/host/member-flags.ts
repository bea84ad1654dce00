import type { MemberLaunch } from '../../ports/machine-provider.ts';
import type { MemberTlsFiles } from '../pki/pki-files.ts';

/**
 * The etcd command line of a member, shared by every provider that runs etcd itself (local processes,
 * hosts over SSH): the same flags wherever the process runs, only the paths differ.
 */

/** etcd 3.6's default: the log is compacted sooner, so a new learner gets a snapshot, not a long replay. */
export const DEFAULT_SNAPSHOT_COUNT = 10_000;

/**
 * What differs between etcd minors on fastplane's command line, one row per minor; every fact and its
 * source is in docs/etcd-behaviour.md ("Member command line per minor"). A flag a minor does not know
 * stops it at once (`flag provided but not defined`), so each row names only flags that minor parses.
 */
export interface MinorFlags {
  /** Extra logging flags: 3.4 defaults to the deprecated capnslog logger. */
  logging: readonly string[];
  /** `--max-learners` exists from 3.6; before, the limit is a hard-coded 1. */
  maxLearners: boolean;
  /** The flag for the watch progress notification interval: `--experimental-` until 3.5, plain from 3.6. */
  watchProgressNotifyInterval: string;
}

export const MEMBER_FLAGS_BY_MINOR: Readonly<Record<'3.4' | '3.5' | '3.6' | '3.7', MinorFlags>> = {
  '3.4': { logging: ['--logger', 'zap', '--log-outputs', 'stderr'], maxLearners: false, watchProgressNotifyInterval: '--experimental-watch-progress-notify-interval' },
  '3.5': { logging: [], maxLearners: false, watchProgressNotifyInterval: '--experimental-watch-progress-notify-interval' },
  '3.6': { logging: [], maxLearners: true, watchProgressNotifyInterval: '--watch-progress-notify-interval' },
  // 3.7 removed every --experimental-* flag that 3.6 had deprecated.
  '3.7': { logging: [], maxLearners: true, watchProgressNotifyInterval: '--watch-progress-notify-interval' },
};

/** kubeadm's value for its etcd members: the API server's watch cache relies on these notifications. */
export const WATCH_PROGRESS_NOTIFY_INTERVAL = '5s';

/**
 * The row for a version's minor. A minor newer than the table gets the newest row (etcd keeps the
 * plain flag names), one older gets the oldest: fastplane runs etcd 3.4 and later.
 */
export function minorFlags(version: string): MinorFlags {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  const known = Object.keys(MEMBER_FLAGS_BY_MINOR) as (keyof typeof MEMBER_FLAGS_BY_MINOR)[];
  const key = `${String(major)}.${String(minor)}`;
  const row = known.find((k) => k === key) ?? (major > 3 || (major === 3 && minor > 7) ? '3.7' : '3.4');
  return MEMBER_FLAGS_BY_MINOR[row];
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
  const minor = minorFlags(launch.version);
  args.push(minor.watchProgressNotifyInterval, WATCH_PROGRESS_NOTIFY_INTERVAL, ...minor.logging);
  if (minor.maxLearners) args.push('--max-learners', String(launch.maxLearners));
  if (launch.quotaBackendBytes !== undefined) args.push('--quota-backend-bytes', String(launch.quotaBackendBytes));
  if (launch.forceNewCluster === true) args.push('--force-new-cluster');
  if (launch.strictReconfigCheck === false) args.push('--strict-reconfig-check=false');
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

import { minorOf } from '../api/version-path.ts';
import { compareVersions } from '../api/versions.ts';
import type { CancelDowngrade, Condition, DowngradeCluster, Wait } from './types.ts';
import type { ClusterView } from './view.ts';

/**
 * A downgrade by etcd's protocol (3.7 -> 3.6, 3.6 -> 3.5): one care job validates and enables it, waits
 * for the cluster version to drop, then restarts the members one at a time in place on the lower
 * version. A lower-version member cannot join a cluster being downgraded, so no machine is replaced;
 * the job runs only on a cluster that is otherwise converged, since it stops each member in turn.
 */
export function planDowngrade(view: ClusterView, settled: boolean): { actions: DowngradeCluster[]; waits: Wait[] } {
  const downgrade = view.downgrade;
  if (downgrade === undefined) return { actions: [], waits: [] };
  const left = view.observed.machines.filter((m) => minorOf(m.record.version) === downgrade.from).map((m) => m.record.name);
  const what = `downgrading ${downgrade.from} -> ${downgrade.to} by etcd's protocol (downgrade validate and enable, then each member restarted in place on ${downgrade.target}, leader last); ${String(left.length)} still on ${downgrade.from}: ${left.join(', ')}`;
  if (!settled) return { actions: [], waits: [{ code: 'DowngradeDeferred', message: `${what}; waits until the cluster has converged` }] };
  return { actions: [{ kind: 'DowngradeCluster', version: downgrade.target, reason: 'VersionDowngrade' }], waits: [{ code: 'Downgrading', message: what }] };
}

/**
 * The cluster version below the minor every voter runs while no downgrade is wanted: etcd's downgrade
 * left enabled (a downgrade stopped midway, then its target set back up), which keeps a member of the
 * higher minor from joining. A cluster version that only lags a rollout looks the same for a few
 * seconds; the cancel job gives it time to rise before it cancels anything.
 */
export function pinnedClusterVersion(view: ClusterView): { cluster: string; members: string } | undefined {
  const cluster = view.observed.care?.clusterVersion;
  if (cluster === undefined || view.downgrade !== undefined || view.voters.length === 0) return undefined;
  const minors = view.voters.map((m) => (m.status?.ok === true ? minorOf(m.status.status.version) : undefined));
  const [lowest] = minors.filter((m) => m !== undefined).sort(compareVersions);
  if (lowest === undefined || minors.includes(undefined) || compareVersions(minorOf(cluster), lowest) >= 0) return undefined;
  return { cluster, members: lowest };
}

/** ClusterVersionPinned as a condition, and CancelDowngrade once the cluster has otherwise converged. */
export function planPinnedVersion(view: ClusterView, settled: boolean): { actions: CancelDowngrade[]; waits: Wait[]; conditions: Condition[]; pinned: boolean } {
  if (view.observed.care?.clusterVersion === undefined) return { actions: [], waits: [], conditions: [], pinned: false };
  const pinned = pinnedClusterVersion(view);
  if (pinned === undefined) {
    return { actions: [], waits: [], conditions: [{ type: 'ClusterVersionPinned', status: 'False', reason: 'ClusterVersionCurrent', message: `cluster version ${view.observed.care.clusterVersion}` }], pinned: false };
  }
  const what = `cluster version ${pinned.cluster} below the ${pinned.members} every voter runs, with no downgrade wanted: etcd's downgrade is left enabled and members of ${pinned.members} cannot join`;
  const condition: Condition = { type: 'ClusterVersionPinned', status: 'True', reason: 'DowngradeLeftEnabled', message: what };
  if (!settled) return { actions: [], waits: [{ code: 'DowngradeCancelDeferred', message: `${what}; cancelling it waits until the cluster has converged` }], conditions: [condition], pinned: true };
  return { actions: [{ kind: 'CancelDowngrade', reason: 'ClusterVersionPinned' }], waits: [{ code: 'CancellingDowngrade', message: `${what}; cancelling it` }], conditions: [condition], pinned: true };
}

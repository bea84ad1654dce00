import { minorOf } from '../api/version-path.ts';
import type { DowngradeCluster, Wait } from './types.ts';
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

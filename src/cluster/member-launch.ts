import type { ControlPlane } from '../api/control-plane.ts';
import { launchedLearnerLimit } from '../domain/learner-limit.ts';
import type { ControlPlaneRecord, MachineRecord } from '../domain/machine.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import type { Observed } from '../planner/types.ts';
import { peerURLOf } from '../planner/view.ts';
import type { EtcdMember } from '../ports/etcd-admin.ts';
import type { InfraProvider, MemberLaunch } from '../ports/machine-provider.ts';
import type { StateStore } from '../ports/state-store.ts';
import { peerURLsIn, tokenForLowMemberId } from './member-id.ts';

// How a machine's member is started, by the executor (init, join, restart) and by day-2 care (rolling
// restarts, recovery, downgrade) alike: the same flags from the same records.

function memberNameFor(observed: Observed, member: EtcdMember): string {
  if (member.name !== '') return member.name;
  const machine = observed.machines.find((m) => {
    const url = peerURLOf(m);
    return url !== undefined && member.peerURLs.includes(url);
  });
  return machine?.record.name ?? `member-${member.id}`;
}

/** etcd --initial-cluster for a joining member: exactly the current membership, by peer URL. */
export function initialClusterFor(observed: Observed, members: readonly EtcdMember[]): string {
  return members.flatMap((m) => m.peerURLs.map((url) => `${memberNameFor(observed, m)}=${url}`)).join(',');
}

export function launchFor(cp: ControlPlaneRecord, machine: MachineRecord, initialCluster: string, state: 'new' | 'existing'): MemberLaunch {
  const spec: ControlPlane['spec'] = cp.manifest.spec;
  const launch: MemberLaunch = {
    memberName: machine.name,
    version: machine.version,
    initialCluster,
    initialClusterState: state,
    // Only a member that starts a cluster gets its ID from the token; joiners get theirs from the add.
    clusterToken: state === 'new' ? tokenForLowMemberId(cp.clusterToken, peerURLsIn(initialCluster, machine.name)) : cp.clusterToken,
    maxLearners: launchedLearnerLimit(machine.version, spec.etcd.maxLearners),
  };
  if (spec.etcd.quotaBackendBytes !== undefined) launch.quotaBackendBytes = spec.etcd.quotaBackendBytes;
  if (spec.etcd.reconfigurationCheck === 'fastplane') launch.strictReconfigCheck = false;
  // Only a member that starts the cluster ('new') restores: joiners get the data from the leader.
  if (state === 'new' && cp.restoreFrom !== undefined) launch.restoreFrom = cp.restoreFrom;
  return launch;
}

/** How a member starts again on its data dir: etcd ignores the bootstrap flags there, so it comes back as itself. */
export function relaunchFor(cp: ControlPlaneRecord, machine: MachineRecord): MemberLaunch {
  return launchFor(cp, machine, `${machine.name}=${machine.peerURL ?? ''}`, 'existing');
}

/** What starting a member needs: the provider, and the lease's writer to record how it starts. */
export interface MemberStarter {
  cluster: string;
  provider: InfraProvider;
  writer: FencedWriter;
}

/**
 * Starts the machine's member, first recording how (etcd's reconfiguration checks on or off, its
 * learner limit): the planner's guard and learner limit follow what the members run, which lags the
 * spec until they are rolled.
 */
export async function startMemberAs(deps: MemberStarter, record: MachineRecord, launch: MemberLaunch): Promise<void> {
  const strict = launch.strictReconfigCheck !== false;
  if (record.strictReconfigCheck !== strict || record.maxLearners !== launch.maxLearners) {
    await deps.writer.commit({ kind: 'PatchMachine', name: record.name, set: { strictReconfigCheck: strict, maxLearners: launch.maxLearners } });
  }
  await deps.provider.startMember(deps.cluster, record.name, launch, deps.writer.fence);
}

/**
 * Starts the member of machine `name` as its record says now, with `initialCluster` (by default the
 * member alone: what a restart on its data dir or the start of a new cluster gives).
 */
export async function startMachineMember(deps: MemberStarter & { store: StateStore }, cp: ControlPlaneRecord, name: string, state: 'new' | 'existing', initialCluster?: string): Promise<void> {
  const record = await deps.store.getMachine(deps.cluster, name);
  if (record?.peerURL === undefined) throw new Error(`machine ${name} has no ${record ? 'peer URL' : 'record'}`);
  await startMemberAs(deps, record, launchFor(cp, record, initialCluster ?? `${name}=${record.peerURL}`, state));
}

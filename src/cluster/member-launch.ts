import { launchedLearnerLimit } from '../domain/learner-limit.ts';
import type { ControlPlaneRecord, MachineRecord } from '../domain/machine.ts';
import { machineTemplateHash, templateRunBy } from '../planner/spec.ts';
import type { Observed } from '../planner/types.ts';
import { peerURLOf } from '../planner/view.ts';
import type { LeaseWriter } from '../ports/care.ts';
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

/** How a member of the spec starts: `kept`, a learner limit it ran before, is never lowered (relaunchFor). */
export function launchFor(cp: ControlPlaneRecord, machine: MachineRecord, initialCluster: string, state: 'new' | 'existing', kept?: number): MemberLaunch {
  const { etcd } = cp.manifest.spec;
  const optional: Partial<MemberLaunch> = {};
  if (etcd.quotaBackendBytes !== undefined) optional.quotaBackendBytes = etcd.quotaBackendBytes;
  if (etcd.reconfigurationCheck === 'fastplane') optional.strictReconfigCheck = false;
  // Only a member that starts the cluster ('new') restores: joiners get the data from the leader.
  if (state === 'new' && cp.restoreFrom !== undefined) optional.restoreFrom = cp.restoreFrom;
  return {
    memberName: machine.name,
    version: machine.version,
    initialCluster,
    initialClusterState: state,
    ...optional,
    maxLearners: launchedLearnerLimit(machine.version, etcd.maxLearners, kept),
    // Only a member that starts a cluster gets its ID from the token; joiners get theirs from the add.
    clusterToken: state === 'new' ? tokenForLowMemberId(cp.clusterToken, peerURLsIn(initialCluster, machine.name)) : cp.clusterToken,
  };
}

/**
 * How a member starts again on its data dir: etcd ignores the bootstrap flags there, so it comes back as
 * itself. Never with a lower learner limit than it last ran: etcd 3.6 applies the log since its last
 * disk snapshot again against the new limit, and a learner add over it breaks the member for good
 * (docs/etcd-behaviour.md, "A restart in place and the learner limit"); the rollout lowers it by replacement.
 */
export function relaunchFor(cp: ControlPlaneRecord, machine: MachineRecord): MemberLaunch {
  return launchFor(cp, machine, `${machine.name}=${machine.peerURL ?? ''}`, 'existing', machine.maxLearners);
}

/** What starting a member needs: the provider, and the lease's writer (the FencedWriter) to record how it starts. */
export interface MemberStarter {
  cluster: string;
  provider: Pick<InfraProvider, 'startMember'>;
  writer: LeaseWriter;
}

/**
 * The one way a member is started, first (init, join, restart) or again in place (certificate renewal,
 * CA rotation, recovery, downgrade): it records how before it starts (the version, the spec's template,
 * etcd's reconfiguration checks on or off, the learner limit), so the planner's guard, learner limit
 * and rollout follow what the members run, not a spec they were never started with.
 */
export async function startMemberAs(deps: MemberStarter, cp: ControlPlaneRecord, record: MachineRecord, launch: MemberLaunch): Promise<void> {
  // A member kept at a higher learner limit than the spec's (relaunchFor) does not run the spec's template: the rollout still replaces it.
  const template = templateRunBy(cp.manifest, launch) ?? record.templateHash;
  const ran = { version: launch.version, templateHash: template, strictReconfigCheck: launch.strictReconfigCheck !== false, maxLearners: launch.maxLearners };
  // Written on every start, even when `record` already says so: a caller may pass the record as it will be (a downgrade's new version).
  await deps.writer.commit({ kind: 'PatchMachine', name: record.name, set: ran });
  await deps.provider.startMember(deps.cluster, record.name, launch, deps.writer.fence);
}

/**
 * Starts the member of machine `name` as its record says now, with `initialCluster` (by default the
 * member alone: what a restart on its data dir or the start of a new cluster gives).
 */
export async function startMachineMember(deps: MemberStarter & { store: StateStore }, cp: ControlPlaneRecord, name: string, state: 'new' | 'existing', initialCluster?: string): Promise<void> {
  const record = await deps.store.getMachine(deps.cluster, name);
  if (record?.peerURL === undefined) throw new Error(`machine ${name} has no ${record ? 'peer URL' : 'record'}`);
  // A restart on its data dir (the member alone, 'existing') is relaunchFor: it keeps the learner limit it ran.
  const restart = state === 'existing' && initialCluster === undefined;
  const launch = launchFor(cp, record, initialCluster ?? `${name}=${record.peerURL}`, state, restart ? record.maxLearners : undefined);
  await startMemberAs(deps, cp, record, launch);
}

/**
 * Records a machine whose member already runs `version` (a downgrade run again) as a start on it would
 * (startMemberAs): the version, the spec's template and the learner limit of that version.
 */
export async function recordRunning(writer: LeaseWriter, cp: ControlPlaneRecord, machine: string, version: string): Promise<void> {
  const set = { version, templateHash: machineTemplateHash(cp.manifest), maxLearners: launchedLearnerLimit(version, cp.manifest.spec.etcd.maxLearners) };
  await writer.commit({ kind: 'PatchMachine', name: machine, set });
}

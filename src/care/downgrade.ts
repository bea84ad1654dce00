import { DOWNGRADE_PROTOCOL_FROM, minorOf } from '../api/version-path.ts';
import { compareVersions } from '../api/versions.ts';
import type { MachineRecord } from '../domain/machine.ts';
import type { LeaseGuard } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin } from '../ports/etcd-admin.ts';
import type { EtcdDowngrade, MemberVersions } from '../ports/etcd-downgrade.ts';
import type { MachineProvider } from '../ports/machine-provider.ts';
import { BlockedError } from './blocked-error.ts';
import { healthyVoters, oneVoterAtATime, type VoterHealth } from './rolling.ts';
import { done, requeueAfter, runSteps, type Step } from './steps.ts';

export interface DowngradeDeps {
  cluster: string;
  admin: EtcdAdmin;
  downgrade: EtcdDowngrade;
  provider: Pick<MachineProvider, 'stopMember'>;
  machines: readonly MachineRecord[];
  /** Starts the machine's member again on its data dir, at the machine's (new) version, through the launch path that records how. */
  start: (machine: MachineRecord) => Promise<void>;
  /** Records the version of a machine whose member already runs it. */
  recordVersion: (machine: string, version: string) => Promise<void>;
  lease: LeaseGuard;
  clock: Clock;
  healthTimeoutMs: number;
  onNote: (text: string) => void;
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

/** What reading the members' versions over time needs. */
type VersionDeps = Pick<DowngradeDeps, 'downgrade' | 'clock' | 'healthTimeoutMs'>;

async function versionsOf(deps: VersionDeps, voters: readonly VoterHealth[]): Promise<MemberVersions[]> {
  return Promise.all(voters.map((v) => deps.downgrade.versions(v.endpoint)));
}

/** Done once `settled` holds for every voter's versions; RequeueAfter `reason` naming `what` until then. */
function versionsStep(deps: VersionDeps, voters: readonly VoterHealth[], reason: string, what: string, settled: (v: MemberVersions) => boolean): Step {
  return async () => {
    const seen = await versionsOf(deps, voters);
    if (seen.every(settled)) return done(what);
    return requeueAfter(VERSION_POLL_MS, reason, `${what} did not happen within ${String(deps.healthTimeoutMs)} ms: ${seen.map((v) => `server ${v.server}, cluster ${v.cluster}, storage ${v.storage ?? '-'}`).join('; ')}`);
  };
}

const VERSION_POLL_MS = 500;

/** Drives a versions step within the health timeout. */
async function until(deps: VersionDeps, voters: readonly VoterHealth[], reason: string, what: string, settled: (v: MemberVersions) => boolean): Promise<void> {
  await runSteps(versionsStep(deps, voters, reason, what, settled), deps.clock, deps.healthTimeoutMs);
}

/**
 * Right after a rollout every member may run the higher minor while the cluster version is still the
 * lower one: the leader raises it at its next version check, seconds later. Read then, a downgrade
 * would look enabled already and restart members without enabling it, racing that raise. So a cluster
 * version below every member's is given RAISE_WAIT_MS to rise; one that stays there is a downgrade
 * enabled before (a rerun), and the job carries on from it.
 */
const RAISE_WAIT_MS = 10_000;

async function settledVersions(deps: VersionDeps, voters: readonly VoterHealth[]): Promise<MemberVersions[]> {
  const deadline = deps.clock.now() + RAISE_WAIT_MS;
  let seen: MemberVersions[] = [];
  // The step ends itself at the deadline: versions that stay are a downgrade enabled before, no error.
  const step: Step = async () => {
    seen = await versionsOf(deps, voters);
    const lowest = seen.map((v) => minorOf(v.server)).sort(compareVersions)[0];
    if (lowest === undefined || seen.every((v) => minorOf(v.cluster) === lowest) || deps.clock.now() >= deadline) return done('versions settled');
    return requeueAfter(VERSION_POLL_MS, 'ClusterVersionRising', "the cluster version has not risen to the members' minor yet");
  };
  await runSteps(step, deps.clock, Infinity);
  return seen;
}

function machineOf(deps: DowngradeDeps, voter: VoterHealth): MachineRecord {
  const machine = voter.member.peerURLs.map((url) => deps.machines.find((m) => m.peerURL === url)).find((m) => m !== undefined);
  if (!machine) throw new BlockedError(`member ${voter.member.name || voter.member.id} has no machine on record`);
  return machine;
}

/**
 * etcd's downgrade protocol ("Downgrade etcd from v3.6 to v3.5", and 3.7 to 3.6 alike): `downgrade
 * validate` and `enable` with the members' own etcdctl; the cluster version drops to the target at
 * once and each member migrates its storage schema, which is waited for; then each member still on
 * the higher minor is stopped and started again on its data dir with `version`, one at a time behind
 * the health gate, leader last. Joining a new lower-version member is no way round: etcd 3.5 refuses to
 * join a cluster being downgraded. Run again, it carries on (enable is skipped once the cluster runs
 * at the target). When it fails midway, `downgrade cancel`, so the higher members run as before.
 */
export async function downgradeCluster(deps: DowngradeDeps, version: string): Promise<string[]> {
  const target = minorOf(version);
  const endpoints = deps.machines.flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));
  await deps.lease.verify();
  const { voters } = await healthyVoters(deps.admin, endpoints);
  const higher = voters.filter((v) => compareVersions(minorOf(v.status.version), target) > 0);
  const tools = higher.map((v) => v.status.version).sort(compareVersions).at(-1);
  const notes: string[] = [];
  const note = (text: string): void => {
    notes.push(text);
    deps.onNote(text);
  };
  if (tools !== undefined) {
    const before = await settledVersions(deps, voters);
    if (before.some((v) => minorOf(v.cluster) !== target)) {
      await deps.downgrade.run('validate', endpoints, target, tools);
      await deps.lease.verify();
      await deps.downgrade.run('enable', endpoints, target, tools);
      note(`downgrade to ${target} validated and enabled (etcdctl ${tools})`);
    }
    try {
      // A member restarted on the lower binary reads the schema its data dir was left in.
      await until(deps, voters, 'StorageNotMigrated', `cluster version ${target} with every storage schema migrated`, (v) => minorOf(v.cluster) === target && (v.storage === undefined || minorOf(v.storage) === target));
      const ids = new Set(higher.map((v) => v.member.id));
      await oneVoterAtATime(deps.admin, endpoints, { clock: deps.clock, healthTimeoutMs: deps.healthTimeoutMs, beforeEach: () => deps.lease.verify(), only: ids }, async (voter) => {
        const machine = machineOf(deps, voter);
        await deps.provider.stopMember(deps.cluster, machine.name, deps.lease.fence);
        await deps.start({ ...machine, version });
        note(`${machine.name} restarted in place on etcd ${version}`);
      });
    } catch (error) {
      try {
        await deps.downgrade.run('cancel', endpoints, target, tools);
        note(`downgrade cancelled after: ${message(error)}`);
      } catch (cancel) {
        note(`downgrade cancel failed too: ${message(cancel)}`);
      }
      throw error;
    }
  }
  // Members that were already on the target (a rerun) are only recorded.
  for (const machine of deps.machines.filter((m) => minorOf(m.version) !== target)) {
    const voter = voters.find((v) => v.member.peerURLs.includes(machine.peerURL ?? ''));
    if (voter && minorOf(voter.status.version) === target) await deps.recordVersion(machine.name, version);
  }
  await until(deps, voters, 'MembersNotOnTarget', `every member on ${target}`, (v) => minorOf(v.server) === target && minorOf(v.cluster) === target);
  note(`cluster version ${target}: every member runs ${version}`);
  if (tools !== undefined && compareVersions(target, DOWNGRADE_PROTOCOL_FROM) >= 0) {
    // A 3.6+ leader ends the job itself once every member runs the target, on its next version check
    // (every few seconds); until then it refuses another downgrade ("cluster has a downgrade job in
    // progress"). Ending it here lets the next change start at once. The downgrade is done either way.
    try {
      await deps.downgrade.run('cancel', endpoints, target, version);
    } catch (error) {
      if (!/no inflight downgrade job/.test(message(error))) note(`the finished downgrade job was left to the leader to end: ${message(error)}`);
    }
  }
  return notes;
}

/** What ending a downgrade left enabled needs: the cluster's clients, the lease, and where to say what it did. */
export type CancelDeps = Pick<DowngradeDeps, 'admin' | 'downgrade' | 'machines' | 'lease' | 'clock' | 'healthTimeoutMs' | 'onNote'>;

/**
 * The cluster version pinned below every member's minor with no downgrade wanted (one stopped midway,
 * then its target set back up): the version gets RAISE_WAIT_MS to rise by itself (it may only lag a
 * rollout), then etcd's own `downgrade cancel` (etcdctl of the members' version) ends the downgrade, and
 * the leader raises the cluster version at its next version check, which is waited for.
 */
export async function cancelDowngrade(deps: CancelDeps): Promise<string[]> {
  const endpoints = deps.machines.flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));
  await deps.lease.verify();
  const { voters } = await healthyVoters(deps.admin, endpoints);
  const seen = await settledVersions(deps, voters);
  const lowest = seen.map((v) => minorOf(v.server)).sort(compareVersions)[0];
  const tools = voters.map((v) => v.status.version).sort(compareVersions).at(-1);
  const pinned = seen.find((v) => minorOf(v.cluster) !== lowest);
  if (lowest === undefined || tools === undefined || pinned === undefined) return [`cluster version ${lowest ?? '?'}: nothing to cancel`];
  const notes: string[] = [];
  if (compareVersions(lowest, DOWNGRADE_PROTOCOL_FROM) >= 0) {
    await deps.lease.verify();
    try {
      await deps.downgrade.run('cancel', endpoints, minorOf(pinned.cluster), tools);
      notes.push(`downgrade to ${minorOf(pinned.cluster)} cancelled (etcdctl ${tools})`);
    } catch (error) {
      // The leader may have ended it meanwhile; the version check below says whether it is gone.
      if (!/no inflight downgrade job/.test(message(error))) throw error;
    }
  }
  await until(deps, voters, 'ClusterVersionNotRaised', `cluster version ${lowest} on every member`, (v) => minorOf(v.cluster) === lowest);
  notes.push(`cluster version back at ${lowest}`);
  for (const note of notes) deps.onNote(note);
  return notes;
}

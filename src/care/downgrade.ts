import { DOWNGRADE_PROTOCOL_FROM, minorOf } from '../api/version-path.ts';
import { compareVersions } from '../api/versions.ts';
import { NOT_STARTED, type RollingProgress } from '../domain/care-job.ts';
import { recordRunning, relaunchFor, startMemberAs } from '../cluster/member-launch.ts';
import type { ControlPlaneRecord, MachineRecord } from '../domain/machine.ts';
import type { DowngradeWork, LeaseWriter } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin } from '../ports/etcd-admin.ts';
import type { EtcdDowngrade, MemberVersions } from '../ports/etcd-downgrade.ts';
import type { MachineProvider } from '../ports/machine-provider.ts';
import { BlockedError } from './blocked-error.ts';
import { driveJob, type JobRecord, type JobStep } from './care-job.ts';
import { healthyVoters, rollingStep, type VoterHealth } from './rolling.ts';
import { done, proceed, requeueAfter, type StepResult } from './steps.ts';

export interface DowngradeDeps {
  cluster: string;
  /** The control plane as recorded: its spec says how a member starts again (member-launch.ts). */
  cp: ControlPlaneRecord;
  admin: EtcdAdmin;
  downgrade: EtcdDowngrade;
  provider: Pick<MachineProvider, 'stopMember' | 'startMember'>;
  machines: readonly MachineRecord[];
  /** The lease's writer: checked before each step that changes the cluster, and records each member's new version. */
  writer: LeaseWriter;
  clock: Clock;
  healthTimeoutMs: number;
  onNote: (text: string) => void;
}

/**
 * Where a downgrade (or its cancel) got: the stage the next step belongs to, and what the first step
 * read of the voters, which every later step works from.
 */
interface DowngradeJob extends JobRecord {
  stage: 'start' | 'settle' | 'migrate' | 'members' | 'record' | 'converge';
  /** The voters' client URLs, where the versions are read. */
  voters: string[];
  /** etcdctl of the highest version a voter runs; none when no voter runs above the target. */
  tools?: string;
  /** When a cluster version below every member's stops being given time to rise. */
  raiseBy: number;
  /** Member IDs of the voters above the target, restarted in place. */
  higher: string[];
  /** Machines whose member already ran the target at the start (a rerun): only recorded. */
  onTarget: string[];
  /** A cancel: the members' lowest minor, which the cluster version comes back to. */
  back?: string;
  rolling: RollingProgress;
}

const message = (error: unknown): string => (error instanceof Error ? error.message : String(error));

const VERSION_POLL_MS = 500;

/**
 * Right after a rollout every member may run the higher minor while the cluster version is still the
 * lower one: the leader raises it at its next version check, seconds later. Read then, a downgrade
 * would look enabled already and restart members without enabling it, racing that raise. So a cluster
 * version below every member's is given RAISE_WAIT_MS to rise; one that stays there is a downgrade
 * enabled before (a rerun), and the job carries on from it.
 */
const RAISE_WAIT_MS = 10_000;

const endpointsOf = (machines: readonly MachineRecord[]): string[] => machines.flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));

const highestVersion = (voters: readonly VoterHealth[]): string | undefined => voters.map((v) => v.status.version).sort(compareVersions).at(-1);

const describeVersions = (seen: readonly MemberVersions[]): string => seen.map((v) => `server ${v.server}, cluster ${v.cluster}, storage ${v.storage ?? '-'}`).join('; ');

const lowestMinor = (seen: readonly MemberVersions[]): string | undefined => seen.map((v) => minorOf(v.server)).sort(compareVersions)[0];

/** The cluster version still below the members' lowest minor, within the time it is given to rise: ask again. */
function stillRising(seen: readonly MemberVersions[], job: DowngradeJob, now: number): StepResult | undefined {
  const lowest = lowestMinor(seen);
  if (lowest === undefined || seen.every((v) => minorOf(v.cluster) === lowest) || now >= job.raiseBy) return undefined;
  return requeueAfter(VERSION_POLL_MS, 'ClusterVersionRising', "the cluster version has not risen to the members' minor yet");
}

/** The voters' health and versions when a job starts: what every later step works from. */
async function started(deps: DowngradeDeps, job: DowngradeJob): Promise<{ voters: VoterHealth[]; job: DowngradeJob }> {
  await deps.writer.verify();
  const { voters } = await healthyVoters(deps.admin, endpointsOf(deps.machines));
  return { voters, job: { ...job, voters: voters.map((v) => v.endpoint), raiseBy: deps.clock.now() + RAISE_WAIT_MS } };
}

function machineOf(deps: DowngradeDeps, voter: VoterHealth): MachineRecord {
  const machine = voter.member.peerURLs.map((url) => deps.machines.find((m) => m.peerURL === url)).find((m) => m !== undefined);
  if (!machine) throw new BlockedError(`member ${voter.member.name || voter.member.id} has no machine on record`);
  return machine;
}

/**
 * One step of etcd's downgrade protocol ("Downgrade etcd from v3.6 to v3.5", and 3.7 to 3.6 alike):
 * `downgrade validate` and `enable` with the members' own etcdctl; the cluster version drops to the
 * target at once and each member migrates its storage schema, which is waited for; then each member
 * still on the higher minor is stopped and started again on its data dir with `version`, one at a time
 * behind the health gate, leader last. Joining a new lower-version member is no way round: etcd 3.5
 * refuses to join a cluster being downgraded. Run again, it carries on (enable is skipped once the
 * cluster runs at the target).
 */
function downgradeStep(deps: DowngradeDeps, version: string): JobStep<DowngradeJob> {
  const target = minorOf(version);
  const endpoints = endpointsOf(deps.machines);
  const versions = (job: DowngradeJob): Promise<MemberVersions[]> => Promise.all(job.voters.map((endpoint) => deps.downgrade.versions(endpoint)));
  return async (job, note) => {
    switch (job.stage) {
      case 'start': {
        const first = await started(deps, job);
        const higher = first.voters.filter((v) => compareVersions(minorOf(v.status.version), target) > 0);
        const tools = highestVersion(higher);
        const onTarget = deps.machines
          .filter((m) => minorOf(m.version) !== target && first.voters.some((v) => v.member.peerURLs.includes(m.peerURL ?? '') && minorOf(v.status.version) === target))
          .map((m) => m.name);
        const next: DowngradeJob = { ...first.job, higher: higher.map((v) => v.member.id), onTarget, stage: tools === undefined ? 'record' : 'settle' };
        return { result: proceed('voters read'), job: tools === undefined ? next : { ...next, tools } };
      }
      case 'settle': {
        const seen = await versions(job);
        const rising = stillRising(seen, job, deps.clock.now());
        if (rising) return { result: rising, job };
        if (seen.some((v) => minorOf(v.cluster) !== target) && job.tools !== undefined) {
          await deps.downgrade.run('validate', endpoints, target, job.tools);
          await deps.writer.verify();
          await deps.downgrade.run('enable', endpoints, target, job.tools);
          note(`downgrade to ${target} validated and enabled (etcdctl ${job.tools})`);
        }
        return { result: proceed('downgrade enabled'), job: { ...job, stage: 'migrate' } };
      }
      case 'migrate': {
        // A member restarted on the lower binary reads the schema its data dir was left in.
        const seen = await versions(job);
        const what = `cluster version ${target} with every storage schema migrated`;
        if (seen.every((v) => minorOf(v.cluster) === target && (v.storage === undefined || minorOf(v.storage) === target))) return { result: proceed(what), job: { ...job, stage: 'members' } };
        return { result: requeueAfter(VERSION_POLL_MS, 'StorageNotMigrated', `${what} did not happen within ${String(deps.healthTimeoutMs)} ms: ${describeVersions(seen)}`), job };
      }
      case 'members': {
        const work = async (voter: VoterHealth): Promise<void> => {
          const machine = machineOf(deps, voter);
          await deps.provider.stopMember(deps.cluster, machine.name, deps.writer.fence);
          const lower = { ...machine, version };
          await startMemberAs({ cluster: deps.cluster, provider: deps.provider, writer: deps.writer }, deps.cp, lower, relaunchFor(deps.cp, lower));
          note(`${machine.name} restarted in place on etcd ${version}`);
        };
        const { result, progress } = await rollingStep({ admin: deps.admin, endpoints, beforeEach: () => deps.writer.verify(), only: new Set(job.higher), work }, job.rolling);
        const next = { ...job, rolling: progress };
        return result.kind === 'Done' ? { result: proceed(result.summary), job: { ...next, stage: 'record' } } : { result, job: next };
      }
      case 'record':
        // Members that were already on the target (a rerun) are only recorded.
        for (const machine of job.onTarget) await recordRunning(deps.writer, deps.cp, machine, version);
        return { result: proceed(`${String(job.onTarget.length)} machines recorded on ${version}`), job: { ...job, stage: 'converge' } };
      case 'converge': {
        const seen = await versions(job);
        const what = `every member on ${target}`;
        if (!seen.every((v) => minorOf(v.server) === target && minorOf(v.cluster) === target)) {
          return { result: requeueAfter(VERSION_POLL_MS, 'MembersNotOnTarget', `${what} did not happen within ${String(deps.healthTimeoutMs)} ms: ${describeVersions(seen)}`), job };
        }
        note(`cluster version ${target}: every member runs ${version}`);
        if (job.tools !== undefined && compareVersions(target, DOWNGRADE_PROTOCOL_FROM) >= 0) {
          // A 3.6+ leader ends the job itself once every member runs the target, on its next version check
          // (every few seconds); until then it refuses another downgrade ("cluster has a downgrade job in
          // progress"). Ending it here lets the next change start at once. The downgrade is done either way.
          try {
            await deps.downgrade.run('cancel', endpoints, target, version);
          } catch (error) {
            if (!/no inflight downgrade job/.test(message(error))) note(`the finished downgrade job was left to the leader to end: ${message(error)}`);
          }
        }
        return { result: done(what), job };
      }
    }
  };
}

const newJob = (now: number): DowngradeJob => ({ stage: 'start', progressAt: now, notes: [], voters: [], raiseBy: now, higher: [], onTarget: [], rolling: NOT_STARTED });

/**
 * A whole downgrade, its steps driven to the end within the pass; returns what it did. When it fails
 * after the downgrade was enabled and before every member runs the target, `downgrade cancel`, so the
 * higher members run as before.
 */
async function downgradeCluster(deps: DowngradeDeps, version: string): Promise<string[]> {
  const step = downgradeStep(deps, version);
  // Where the last step left the job: a failure between the enable and the last restart cancels.
  const reached: { tools?: string; cancellable: boolean } = { cancellable: false };
  const tracked: JobStep<DowngradeJob> = async (job, note) => {
    const next = await step(job, note);
    reached.cancellable = next.job.stage === 'migrate' || next.job.stage === 'members';
    if (next.job.tools !== undefined) reached.tools = next.job.tools;
    return next;
  };
  try {
    return (await driveJob(tracked, newJob(deps.clock.now()), deps.clock, deps.healthTimeoutMs, deps.onNote)).notes;
  } catch (error) {
    if (reached.cancellable && reached.tools !== undefined) {
      try {
        await deps.downgrade.run('cancel', endpointsOf(deps.machines), minorOf(version), reached.tools);
        deps.onNote(`downgrade cancelled after: ${message(error)}`);
      } catch (cancel) {
        deps.onNote(`downgrade cancel failed too: ${message(cancel)}`);
      }
    }
    throw error;
  }
}

/**
 * One step of ending a downgrade left enabled: the cluster version pinned below every member's minor
 * with no downgrade wanted (one stopped midway, then its target set back up) gets RAISE_WAIT_MS to
 * rise by itself (it may only lag a rollout), then etcd's own `downgrade cancel` (etcdctl of the
 * members' version) ends the downgrade, and the leader raises the cluster version at its next version
 * check, which is waited for.
 */
function cancelStep(deps: DowngradeDeps): JobStep<DowngradeJob> {
  const endpoints = endpointsOf(deps.machines);
  const versions = (job: DowngradeJob): Promise<MemberVersions[]> => Promise.all(job.voters.map((endpoint) => deps.downgrade.versions(endpoint)));
  return async (job, note) => {
    if (job.stage === 'start') {
      const first = await started(deps, job);
      const tools = highestVersion(first.voters);
      return { result: proceed('voters read'), job: { ...first.job, stage: 'settle', ...(tools === undefined ? {} : { tools }) } };
    }
    const seen = await versions(job);
    if (job.stage === 'settle') {
      const lowest = lowestMinor(seen);
      const rising = stillRising(seen, job, deps.clock.now());
      if (rising) return { result: rising, job };
      const pinned = seen.find((v) => minorOf(v.cluster) !== lowest);
      if (lowest === undefined || job.tools === undefined || pinned === undefined) return { result: done(`cluster version ${lowest ?? '?'}: nothing to cancel`), job };
      if (compareVersions(lowest, DOWNGRADE_PROTOCOL_FROM) >= 0) {
        await deps.writer.verify();
        try {
          await deps.downgrade.run('cancel', endpoints, minorOf(pinned.cluster), job.tools);
          note(`downgrade to ${minorOf(pinned.cluster)} cancelled (etcdctl ${job.tools})`);
        } catch (error) {
          // The leader may have ended it meanwhile; the version check below says whether it is gone.
          if (!/no inflight downgrade job/.test(message(error))) throw error;
        }
      }
      return { result: proceed('downgrade cancelled'), job: { ...job, stage: 'converge', back: lowest } };
    }
    const back = job.back ?? '?';
    const what = `cluster version ${back} on every member`;
    if (!seen.every((v) => minorOf(v.cluster) === back)) {
      return { result: requeueAfter(VERSION_POLL_MS, 'ClusterVersionNotRaised', `${what} did not happen within ${String(deps.healthTimeoutMs)} ms: ${describeVersions(seen)}`), job };
    }
    note(`cluster version back at ${back}`);
    return { result: done(what), job };
  };
}

/** A downgrade or a cancel, its steps driven to the end within the pass; returns what it did. */
export async function changeClusterVersion(deps: DowngradeDeps, work: DowngradeWork): Promise<string[]> {
  if (work.kind === 'downgrade') return downgradeCluster(deps, work.version);
  const job = await driveJob(cancelStep(deps), newJob(deps.clock.now()), deps.clock, deps.healthTimeoutMs, deps.onNote);
  return job.notes.length > 0 ? job.notes : [job.ended?.summary ?? ''];
}

import { relaunchFor, startMemberAs } from '../cluster/member-launch.ts';
import { observe } from '../cluster/observe.ts';
import type { ControlPlaneRecord } from '../domain/machine.ts';
import type { Observed, ObservedMachine } from '../planner/types.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { toPlannerSpec } from '../planner/spec.ts';
import { quorumHolds } from '../planner/health.ts';
import { buildView} from '../planner/view.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin } from '../ports/etcd-admin.ts';
import type { EtcdMaintenance } from '../ports/etcd-maintenance.ts';
import type { CommittedIndexReading, InfraProvider } from '../ports/machine-provider.ts';
import type { StateStore } from '../ports/state-store.ts';
import { BlockedError } from './blocked-error.ts';
import { membershipAgreesStep } from './rolling.ts';
import { done, requeueAfter, runSteps, type Step } from './steps.ts';

/**
 * `fastplane recover`: the way back when quorum is lost. When a quorum of the voters still has an
 * intact data dir (members killed, hosts rebooted), the stopped ones are restarted from their data as
 * they were: together they hold every committed entry, and nothing is forced. Only when a majority is
 * gone for good (disks lost) does etcd need --force-new-cluster: the voter with the highest committed
 * index among every member whose data dir is intact (running or stopped) is restarted once with it (a
 * one-member cluster keeping its data and member ID), every other machine is deleted, and the normal
 * reconcile scales back to `replicas`: parallel provisioning, one learner at a time. A forced start
 * keeps only what that member's own log marks committed (docs/etcd-behaviour.md): entries acknowledged
 * after its last persisted commit index are lost, which is why restarting comes first.
 */

export interface SurvivorReading {
  machine: string;
  memberId?: string;
  clientURL: string;
  /** The member's committed raft index, by `source`. */
  raftIndex: number;
  /** 'data dir': read offline from its write-ahead log; 'status': asked of the running member. */
  source: 'data dir' | 'status';
  running: boolean;
  /** A learner is listed but never chosen: it may lack committed entries, and it cannot lead alone. */
  learner: boolean;
}

export interface RecoveryPlan {
  cluster: string;
  /** Members with a reading, the chosen one first, then by committed index. */
  survivors: SurvivorReading[];
  /** Machines that neither answer nor have a data dir this host can read. */
  unread: string[];
  /** Voters whose host did not answer the reading of their data dir (planned only when accepted). */
  unreachable: string[];
  chosen: SurvivorReading;
  /**
   * Stopped voters with an intact data dir, restarted as they were, when with the running ones they
   * make a quorum of the voters; empty when a majority is gone and only forcing can help.
   */
  restart: string[];
  /** When forcing: every machine but the chosen one (other survivors' data diverges from it). */
  deleted: string[];
  /** The highest raft index any reconcile pass observed, when recorded. */
  highestRaftIndex?: number;
  replicas: number;
}

export interface RecoverDeps {
  cluster: string;
  store: StateStore;
  provider: InfraProvider;
  admin: EtcdAdmin;
  maintenance: EtcdMaintenance;
  clock: Clock;
  /**
   * A member's committed index read offline from its data dir, where it lies (the provider's
   * `committedIndexOffline`). Without it, stopped members cannot be read and only running ones are
   * compared (by their status).
   */
  committedIndexOffline?: (machine: string) => Promise<CommittedIndexReading>;
  /**
   * Plan although the host of a voter did not answer: that voter may hold newer data than the one
   * chosen, so without this the survey refuses.
   */
  acceptUnreachable?: boolean;
}

/** A cluster with quorum needs no recovery: `recover` would only throw data away. */
export class HasQuorumError extends Error {
  override readonly name = 'HasQuorumError';
}

async function controlPlane(deps: RecoverDeps): Promise<ControlPlaneRecord> {
  const cp = await deps.store.getControlPlane(deps.cluster);
  if (!cp) throw new Error(`control plane ${deps.cluster} has no record`);
  return cp;
}

/** Voters before learners, then the highest committed index, then a running member, then the oldest machine. */
function byProgress(a: SurvivorReading, b: SurvivorReading): number {
  return Number(a.learner) - Number(b.learner) || b.raftIndex - a.raftIndex || Number(b.running) - Number(a.running) || a.machine.localeCompare(b.machine, 'en', { numeric: true });
}

/** The survivors ordered so that the one to force comes first: never a learner. */
export function rankSurvivors(readings: readonly SurvivorReading[]): { ranked: SurvivorReading[]; chosen?: SurvivorReading } {
  const ranked = [...readings].sort(byProgress);
  const chosen = ranked[0]?.learner === false ? ranked[0] : undefined;
  return chosen === undefined ? { ranked } : { ranked, chosen };
}

/** Learner or voter: from the member list when it could be read, else from the machine's record. */
function isLearner(observed: Observed, machine: ObservedMachine): boolean {
  const peerURL = machine.record.peerURL;
  if (observed.members.ok) {
    const member = observed.members.list.find((m) => (machine.record.memberId !== undefined && m.id === machine.record.memberId) || (peerURL !== undefined && m.peerURLs.includes(peerURL)));
    if (member) return member.isLearner;
  }
  // etcd never demotes: a member that was ever recorded as a voter still is one.
  return machine.record.phaseTimes.Voter === undefined;
}

/**
 * One machine's committed index: offline from its data dir when this host can read it (the same
 * measure for running and stopped members), else from a running member's status.
 */
async function readingOf(deps: RecoverDeps, observed: Observed, machine: ObservedMachine): Promise<SurvivorReading | { unreachable: string } | undefined> {
  const { clientURL, name, memberId } = machine.record;
  if (clientURL === undefined || machine.infra === undefined) return undefined;
  const running = machine.infra.memberRunning;
  const base = { machine: name, clientURL, running, learner: isLearner(observed, machine), ...(memberId === undefined ? {} : { memberId }) };
  if (deps.committedIndexOffline) {
    const offline = await deps.committedIndexOffline(name);
    if (offline.kind === 'unreachable') return base.learner ? undefined : { unreachable: `${name} (${offline.reason})` };
    return offline.kind === 'noData' ? undefined : { ...base, raftIndex: offline.raftIndex, source: 'data dir' };
  }
  if (!running) return undefined;
  try {
    const usage = await deps.maintenance.usage(clientURL);
    return { ...base, memberId: usage.memberId, raftIndex: usage.raftIndex, learner: base.learner || usage.isLearner, source: 'status' };
  } catch {
    return undefined;
  }
}

/** Reads only: which members answer, and what recovery would do. Throws HasQuorumError or BlockedError. */
export async function surveyRecovery(deps: RecoverDeps): Promise<RecoveryPlan> {
  const cp = await controlPlane(deps);
  const observed = await observe({ cluster: deps.cluster, etcd: deps.admin, provider: deps.provider, store: deps.store });
  const view = buildView(toPlannerSpec(cp.manifest), observed, deps.clock.now());
  if (view.membersKnown && view.voters.length > 0 && view.hasQuorum) {
    throw new HasQuorumError(
      `control plane ${deps.cluster} has quorum (${String(view.healthyVoters.length)} of ${String(view.voters.length)} voters healthy): nothing to recover; recover is only for a majority lost for good`,
    );
  }
  const readings = await Promise.all(observed.machines.map((m) => readingOf(deps, observed, m)));
  const unreachable = readings.flatMap((r) => (r !== undefined && 'unreachable' in r ? [r.unreachable] : []));
  if (unreachable.length > 0 && deps.acceptUnreachable !== true) {
    throw new BlockedError(
      `cannot read the data dir of voter ${unreachable.join(', ')}: its host does not answer, and it may hold newer data than any member read; bring the host back, or run recover again with --accept-unreachable to choose among the members read`,
    );
  }
  const { ranked, chosen } = rankSurvivors(readings.filter((r): r is SurvivorReading => r !== undefined && !('unreachable' in r)));
  if (!chosen) {
    const learners = ranked.length === 0 ? '' : ` (only learners have one: ${ranked.map((r) => r.machine).join(', ')})`;
    throw new BlockedError(`no voter of ${deps.cluster} answers or has an intact data dir${learners}: nothing to recover from; restore from a backup (fastplane backups ${deps.cluster}, then fastplane restore ${deps.cluster} --from FILE --replace)`);
  }
  const voters = observed.machines.filter((m) => !isLearner(observed, m)).length;
  const intactVoters = ranked.filter((r) => !r.learner);
  const plan: RecoveryPlan = {
    cluster: deps.cluster,
    survivors: ranked,
    unread: observed.machines.map((m) => m.record.name).filter((name) => !ranked.some((r) => r.machine === name)),
    unreachable,
    chosen,
    restart: quorumHolds(voters, intactVoters.length) ? intactVoters.filter((r) => !r.running).map((r) => r.machine) : [],
    deleted: observed.machines.map((m) => m.record.name).filter((name) => name !== chosen.machine),
    replicas: cp.manifest.spec.replicas,
  };
  if (cp.highestRaftIndex !== undefined) plan.highestRaftIndex = cp.highestRaftIndex;
  return plan;
}

/** What may have been lost: raft entries past the survivor's index that some pass saw committed. */
export function describeLoss(plan: RecoveryPlan): string {
  const { chosen, highestRaftIndex } = plan;
  if (highestRaftIndex === undefined) return `no raft index was recorded before: cannot tell what was lost (survivor ${chosen.machine} at index ${String(chosen.raftIndex)})`;
  const missing = Math.max(0, highestRaftIndex - chosen.raftIndex);
  if (missing === 0) return `nothing observed was lost: survivor ${chosen.machine} is at raft index ${String(chosen.raftIndex)}, the highest ever observed was ${String(highestRaftIndex)}`;
  return `up to ${String(missing)} raft entries may be lost: survivor ${chosen.machine} is at raft index ${String(chosen.raftIndex)}, the highest ever observed was ${String(highestRaftIndex)}`;
}

function describeSurvivor(s: SurvivorReading): string {
  const state = `${s.running ? 'running' : 'stopped'}${s.learner ? ', learner: never chosen' : ''}`;
  return `  ${s.machine}  member ${s.memberId ?? 'unknown'}  committed index ${String(s.raftIndex)} (${s.source})  ${state}`;
}

export function describePlan(plan: RecoveryPlan): string[] {
  const { chosen } = plan;
  const others = plan.survivors.filter((s) => s !== chosen && !s.learner);
  const why = others.length === 0 ? 'the only voter with a reading' : `the highest committed index of the voters (${others.map((s) => `${s.machine} ${String(s.raftIndex)}`).join(', ')})`;
  return [
    `members of ${plan.cluster} with an intact data dir or an answer (highest committed index first):`,
    ...plan.survivors.map(describeSurvivor),
    ...(plan.unread.length === 0 ? [] : [`  not read (no data dir here, no answer): ${plan.unread.join(', ')}`]),
    ...(plan.unreachable.length === 0 ? [] : [`  host not answering, accepted (--accept-unreachable): ${plan.unreachable.join(', ')}`]),
    `chosen: ${chosen.machine} at committed index ${String(chosen.raftIndex)}, ${why}`,
    'plan:',
    ...(plan.restart.length > 0
      ? [
          `  1. restart ${plan.restart.join(', ')} from ${plan.restart.length === 1 ? 'its data dir' : 'their data dirs'} as they were: with the running voters they are a quorum, which holds every committed entry; nothing is forced or lost`,
          `  2. only if quorum is not back within ${String(RESTART_TIMEOUT_MS / 1000)} s: the steps below`,
        ]
      : []),
    `  ${plan.restart.length > 0 ? '3' : '1'}. restart ${plan.chosen.machine} once with --force-new-cluster: a one-member cluster with its data`,
    `  ${plan.restart.length > 0 ? '4' : '2'}. delete ${plan.deleted.length === 0 ? 'no machine' : plan.deleted.join(', ')}`,
    `  ${plan.restart.length > 0 ? '5' : '3'}. scale back to ${String(plan.replicas)} members: machines provisioned in parallel, one learner at a time`,
    plan.restart.length > 0 ? `if forced: ${describeLoss(plan)}` : describeLoss(plan),
  ];
}

const FORCED_START_TIMEOUT_MS = 60_000;
const RESTART_TIMEOUT_MS = 60_000;

/**
 * Carries the plan out under the caller's lease: the stopped voters restarted from their data when
 * they make a quorum with the running ones ('restarted'), else (or when quorum does not come back) the
 * chosen survivor forced ('forced'). The normal reconcile then converges.
 */
export async function carryOutRecovery(deps: RecoverDeps, writer: FencedWriter, plan: RecoveryPlan): Promise<'restarted' | 'forced'> {
  if (plan.restart.length > 0 && (await restartQuorum(deps, writer, plan))) return 'restarted';
  await forceNewCluster(deps, writer, plan);
  return 'forced';
}

const POLL_MS = 250;

/** Done once a linearizable member list answers: only through a leader with a quorum behind it. */
export function quorumBackStep(admin: EtcdAdmin, endpoints: readonly string[]): Step {
  return async () => {
    try {
      await admin.memberList(endpoints);
      return done('quorum is back');
    } catch (error) {
      return requeueAfter(POLL_MS, 'QuorumNotBack', `no quorum answers yet: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
}

/** Done once the forced survivor answers as a one-member cluster. */
export function forcedBackStep(admin: EtcdAdmin, chosen: SurvivorReading): Step {
  return async () => {
    try {
      if ((await admin.memberList([chosen.clientURL])).length === 1) return done(`${chosen.machine} runs alone`);
    } catch {
      // Still starting.
    }
    return requeueAfter(POLL_MS, 'SurvivorNotBack', `${chosen.machine} did not come back as a one-member cluster within ${String(FORCED_START_TIMEOUT_MS / 1000)} s`);
  };
}

/** Starts each stopped voter of `plan.restart` as it was; true once a quorum answers a linearizable member list. */
async function restartQuorum(deps: RecoverDeps, writer: FencedWriter, plan: RecoveryPlan): Promise<boolean> {
  const { cluster, provider, clock } = deps;
  const cp = await controlPlane(deps);
  const startedAt = clock.now();
  for (const name of plan.restart) {
    const record = await deps.store.getMachine(cluster, name);
    if (record?.peerURL === undefined) return false;
    await writer.verify();
    // An existing data dir: etcd ignores the initial cluster and rejoins with the members it recorded.
    await startMemberAs({ cluster, provider, writer }, cp, record, relaunchFor(cp, record));
  }
  const endpoints = plan.survivors.filter((s) => !s.learner).map((s) => s.clientURL);
  try {
    await runSteps(quorumBackStep(deps.admin, endpoints), clock, RESTART_TIMEOUT_MS);
  } catch (error) {
    if (error instanceof BlockedError) return false;
    throw error;
  }
  // Outside the catch: a restarted member that disagrees on membership stops recovery, never forces it.
  const restartedIds = plan.survivors.filter((s) => plan.restart.includes(s.machine)).flatMap((s) => (s.memberId === undefined ? [] : [s.memberId]));
  await runSteps(membershipAgreesStep(deps.admin, endpoints, restartedIds), clock, RESTART_TIMEOUT_MS);
  await writer.commit({
    kind: 'AppendEvent',
    event: { cluster, at: startedAt, endedAt: clock.now(), type: 'Normal', reason: 'QuorumRestored', action: 'RestartMembers', outcome: 'Succeeded', message: `restarted ${plan.restart.join(', ')} from their data dirs: quorum is back with every committed entry; nothing was forced` },
  });
  return true;
}

/**
 * Steps 1 and 2 of the plan, under the caller's lease (the normal reconcile then does step 3). The
 * other members are stopped first, so none rejoins the old membership while the survivor restarts.
 */
async function forceNewCluster(deps: RecoverDeps, writer: FencedWriter, plan: RecoveryPlan): Promise<void> {
  const { cluster, provider, clock } = deps;
  const cp = await controlPlane(deps);
  const record = await deps.store.getMachine(cluster, plan.chosen.machine);
  if (record?.peerURL === undefined) throw new Error(`machine ${plan.chosen.machine} has no peer URL`);
  await writer.verify();
  for (const name of plan.deleted) await provider.stopMember(cluster, name, writer.fence);
  await provider.stopMember(cluster, plan.chosen.machine, writer.fence);
  await writer.verify();
  await startMemberAs({ cluster, provider, writer }, cp, record, { ...relaunchFor(cp, record), forceNewCluster: true });
  await runSteps(forcedBackStep(deps.admin, plan.chosen), clock, FORCED_START_TIMEOUT_MS);
  const at = clock.now();
  // Failed and leaving: the reconcile tears these machines down and provisions their replacements.
  await writer.commit(
    ...plan.deleted.map((name) => ({ kind: 'PatchMachine' as const, name, set: { failed: { reason: 'LostInRecovery', message: `deleted by fastplane recover (survivor ${plan.chosen.machine})`, at }, deleteRequested: { reason: 'LostInRecovery', at } } })),
    {
      kind: 'AppendEvent',
      event: { cluster, at, endedAt: clock.now(), type: 'Warning', reason: 'ForcedNewCluster', action: 'ForceNewCluster', outcome: 'Succeeded', machine: plan.chosen.machine, message: `restarted ${plan.chosen.machine} with --force-new-cluster; ${describeLoss(plan)}` },
    },
  );
}

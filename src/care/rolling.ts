import { NOT_STARTED, type RollingProgress } from '../domain/care-job.ts';
import { agreedLeader, isHealthyVoter, leaderClaims, mayStopVoter, type VoterReading } from '../planner/health.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin, EtcdMember, EtcdMemberStatus } from '../ports/etcd-admin.ts';
import { BlockedError } from './blocked-error.ts';
import { membershipAgrees } from './membership-agreement.ts';
import { done, failed, proceed, requeueAfter, runSteps, type Step, type StepResult } from './steps.ts';

/**
 * Day-2 work done to members one at a time (certificate renewal, defragmentation): the cluster must
 * be healthy before it starts; each voter is stopped only when the planner's health gate allows it
 * (planner/health.ts), and is back before the next. Followers go first, and the leader last,
 * after leadership has moved away, so no step costs an election on top of the member's own pause.
 */

export interface VoterHealth {
  member: EtcdMember;
  endpoint: string;
  status: EtcdMemberStatus;
}

export interface ClusterHealth {
  leaderId: string;
  /** Followers first, the leader last. */
  voters: VoterHealth[];
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function nameOf(member: EtcdMember): string {
  return member.name || member.id;
}

/** One reading of the cluster: every voter for the gate, with the status of those that answer. */
export interface ClusterReading {
  gate: VoterReading[];
  learners: string[];
  answering: VoterHealth[];
  /** Why each voter that did not answer did not ("has not started", "does not answer (...)"), by member ID. */
  silent: Map<string, string>;
}

type VoterAnswer = { voter: VoterHealth } | { member: EtcdMember; why: string };

async function answerOf(admin: EtcdAdmin, member: EtcdMember): Promise<VoterAnswer> {
  const endpoint = member.clientURLs[0];
  if (endpoint === undefined) return { member, why: 'has not started' };
  try {
    return { voter: { member, endpoint, status: await admin.status(endpoint) } };
  } catch (error) {
    return { member, why: `does not answer (${message(error)})` };
  }
}

export async function readCluster(admin: EtcdAdmin, endpoints: readonly string[]): Promise<ClusterReading> {
  let members: EtcdMember[];
  try {
    members = await admin.memberList(endpoints);
  } catch (error) {
    throw new BlockedError(`cannot read the member list: ${message(error)}`);
  }
  const reading: ClusterReading = { gate: [], learners: members.filter((m) => m.isLearner).map(nameOf), answering: [], silent: new Map() };
  for (const answer of await Promise.all(members.filter((m) => !m.isLearner).map((m) => answerOf(admin, m)))) {
    if ('voter' in answer) {
      const { member, status } = answer.voter;
      reading.answering.push(answer.voter);
      reading.gate.push({ id: member.id, name: nameOf(member), leaderId: status.leaderId });
    } else {
      reading.silent.set(answer.member.id, answer.why);
      reading.gate.push({ id: answer.member.id, name: nameOf(answer.member) });
    }
  }
  return reading;
}

/** Every voter answers and names the same leader, and no learner is joining; else BlockedError naming why. */
export async function healthyVoters(admin: EtcdAdmin, endpoints: readonly string[]): Promise<ClusterHealth> {
  const reading = await readCluster(admin, endpoints);
  const [learner] = reading.learners;
  if (learner !== undefined) throw new BlockedError(`learner ${learner} is joining; run it again once the cluster converged`);
  const [silent] = reading.gate.filter((v) => reading.silent.has(v.id));
  if (silent) throw new BlockedError(`voter ${silent.name} ${reading.silent.get(silent.id) ?? ''}`);
  const leaderId = agreedLeader(reading.gate);
  if (leaderId === undefined || !reading.gate.every(isHealthyVoter)) throw new BlockedError(`voters do not agree on a leader (${leaderClaims(reading.gate)})`);
  const voters = [...reading.answering].sort((a, b) => Number(a.member.id === leaderId) - Number(b.member.id === leaderId));
  return { leaderId, voters };
}

/** A reading for a step: the member list unreadable is an Error (no voter can be judged without it). */
async function readForStep(admin: EtcdAdmin, endpoints: readonly string[]): Promise<ClusterReading | StepResult> {
  try {
    return await readCluster(admin, endpoints);
  } catch (error) {
    return failed('MemberListUnavailable', message(error));
  }
}

const POLL_MS = 200;

/**
 * One step toward `work` on voter `id`: done once the health gate let it be stopped and `work` ran
 * (`beforeEach` first: the lease). Until then, leadership is moved off it when it leads
 * (RequeueAfter LeaderMoving), or the gate's code says what it waits for.
 */
export function stopVoterStep(admin: EtcdAdmin, endpoints: readonly string[], id: string, beforeEach: () => Promise<void>, work: (voter: VoterHealth) => Promise<void>): Step {
  return async () => {
    const reading = await readForStep(admin, endpoints);
    if ('kind' in reading) return reading;
    const verdict = mayStopVoter(reading.gate, reading.learners, id);
    if (!verdict.ok && verdict.code === 'NotAVoter') return failed('VoterLeft', `member ${id} left the cluster meanwhile`);
    const target = reading.answering.find((v) => v.member.id === id);
    const successor = reading.answering.find((v) => v.member.id !== id && v.status.leaderId === id);
    if (!verdict.ok && verdict.code === 'IsLeader' && target && successor) {
      // Handed to a healthy follower; a later reading shows when every voter follows it.
      await admin.moveLeader(target.endpoint, successor.member.id);
      return requeueAfter(POLL_MS, 'LeaderMoving', `moving leadership off ${nameOf(target.member)}`);
    }
    if (verdict.ok && target) {
      await beforeEach();
      await work(target);
      return done(`${nameOf(target.member)} done`);
    }
    const name = reading.gate.find((v) => v.id === id)?.name ?? id;
    return verdict.ok ? requeueAfter(POLL_MS, 'VoterNotAnswering', `voter ${name} ${reading.silent.get(id) ?? 'does not answer'}`) : requeueAfter(POLL_MS, verdict.code, verdict.message);
  };
}

/** The voter `id` against the leader (or another voter, when it leads itself): do they list the same members? */
async function agreementOf(admin: EtcdAdmin, reading: ClusterReading, id: string, leaderId: string): Promise<StepResult> {
  const own = reading.answering.find((v) => v.member.id === id);
  const peer = reading.answering.find((v) => v.member.id === leaderId && v.member.id !== id) ?? reading.answering.find((v) => v.member.id !== id);
  if (own === undefined) return requeueAfter(POLL_MS, 'VoterNotBack', `voter ${id} does not answer`);
  if (peer === undefined) return done(`${nameOf(own.member)} is the only voter`);
  return membershipAgrees(admin, { name: nameOf(own.member), endpoint: own.endpoint }, { name: nameOf(peer.member), endpoint: peer.endpoint });
}

/**
 * Done once voter `id` answers again with the leader the voters agree on, and lists the members the
 * leader lists (membership-agreement.ts); RequeueAfter VoterNotBack until then, Error MembershipDiverged
 * when its list differs.
 */
export function voterBackStep(admin: EtcdAdmin, endpoints: readonly string[], id: string): Step {
  return async () => {
    const reading = await readForStep(admin, endpoints);
    if ('kind' in reading) return reading;
    const voter = reading.gate.find((v) => v.id === id);
    const leaderId = agreedLeader(reading.gate);
    if (voter === undefined || !isHealthyVoter(voter) || leaderId === undefined) {
      return requeueAfter(POLL_MS, 'VoterNotBack', `voter ${voter?.name ?? id} is not back: ${reading.silent.get(id) ?? 'the voters do not agree on a leader'}`);
    }
    const agreed = await agreementOf(admin, reading, id, leaderId);
    return agreed.kind === 'Done' ? done(`${voter.name} is back; ${agreed.summary}`) : agreed;
  };
}

/** Done once every member of `ids` (restarted in place) lists the members the leader lists; Error MembershipDiverged otherwise. */
export function membershipAgreesStep(admin: EtcdAdmin, endpoints: readonly string[], ids: readonly string[]): Step {
  return async () => {
    const reading = await readForStep(admin, endpoints);
    if ('kind' in reading) return reading;
    const leaderId = agreedLeader(reading.gate);
    if (leaderId === undefined) return requeueAfter(POLL_MS, 'LeaderUnknown', `voters do not agree on a leader (${leaderClaims(reading.gate)})`);
    for (const id of ids) {
      const agreed = await agreementOf(admin, reading, id, leaderId);
      if (agreed.kind !== 'Done') return agreed;
    }
    return done(`${String(ids.length)} restarted members list the same members as the leader`);
  };
}

export interface RollingWork {
  admin: EtcdAdmin;
  endpoints: readonly string[];
  /** Guards the work on each voter (the lease). */
  beforeEach: () => Promise<void>;
  /** Only these member IDs, when given. */
  only?: ReadonlySet<string>;
  /** Asked before each voter is stopped: a RequeueAfter it returns holds the work (the apiservers' readiness). */
  gate?: () => Promise<StepResult | undefined>;
  work: (voter: VoterHealth) => Promise<void>;
}

/**
 * One step of a rolling job: the start's health check, one voter's work (followers first, the leader
 * last after leadership moved off it), or one look whether that voter is back. Returns the result and
 * the progress the next step starts from.
 */
export async function rollingStep(job: RollingWork, progress: RollingProgress): Promise<{ result: StepResult; progress: RollingProgress }> {
  const { admin, endpoints } = job;
  if (!progress.started) {
    try {
      await healthyVoters(admin, endpoints);
    } catch (error) {
      if (error instanceof BlockedError) return { result: failed('ClusterUnhealthy', error.message), progress };
      throw error;
    }
    return { result: proceed('every voter healthy, no learner joining'), progress: { ...progress, started: true } };
  }
  if (progress.awaiting !== undefined) {
    const back = await voterBackStep(admin, endpoints, progress.awaiting)();
    if (back.kind !== 'Done') return { result: back, progress };
    return { result: proceed(back.summary), progress: { started: true, done: [...progress.done, progress.awaiting] } };
  }
  const reading = await readForStep(admin, endpoints);
  if ('kind' in reading) return { result: reading, progress };
  const leaderId = agreedLeader(reading.gate);
  const [next] = reading.gate
    .map((v) => v.id)
    .filter((id) => !progress.done.includes(id) && (job.only?.has(id) ?? true))
    .sort((a, b) => Number(a === leaderId) - Number(b === leaderId));
  if (next === undefined) return { result: done(`${String(progress.done.length)} voters done`), progress };
  const held = await job.gate?.();
  if (held !== undefined) return { result: held, progress };
  const result = await stopVoterStep(admin, endpoints, next, job.beforeEach, job.work)();
  return result.kind === 'Done' ? { result: proceed(result.summary), progress: { ...progress, awaiting: next } } : { result, progress };
}

/**
 * Runs `step` on each voter (or those whose IDs are in `only`), followers first and the leader last
 * (after moving leadership away). Each voter is stopped only when the health gate allows it, and is
 * back, answering with the agreed leader, before the next; `beforeEach` guards every step (the lease).
 * The rolling steps are driven by runSteps, each wait within `healthTimeoutMs`.
 */
export async function oneVoterAtATime(
  admin: EtcdAdmin,
  endpoints: readonly string[],
  options: { clock: Clock; healthTimeoutMs: number; beforeEach: () => Promise<void>; only?: ReadonlySet<string>; gate?: RollingWork['gate'] },
  step: (voter: VoterHealth) => Promise<void>,
): Promise<void> {
  const job: RollingWork = { admin, endpoints, beforeEach: options.beforeEach, work: step, ...(options.only === undefined ? {} : { only: options.only }), ...(options.gate === undefined ? {} : { gate: options.gate }) };
  let progress = NOT_STARTED;
  await runSteps(
    async () => {
      const next = await rollingStep(job, progress);
      progress = next.progress;
      return next.result;
    },
    options.clock,
    options.healthTimeoutMs,
  );
}

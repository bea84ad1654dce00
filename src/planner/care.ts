import type { CareJobKind, CareJobRecord } from '../domain/care-job.ts';
import type { CareAction, Condition, Wait } from './types.ts';
import { type ClusterView } from './view.ts';

/** Certificates are renewed this long before the first of them expires (kubeadm warns 30 days ahead). */
export const CERTIFICATE_RENEW_BEFORE_MS = 30 * 86_400_000;

const iso = (ms: number): string => new Date(ms).toISOString();

export interface CarePlan {
  actions: CareAction[];
  waits: Wait[];
  conditions: Condition[];
  /** Time until the next scheduled backup is due, when one is scheduled. */
  nextDueInMs?: number;
}

/**
 * Scheduled backups: due `every` after the newest backup or the last attempt, whichever is later, so
 * a failing backup is retried on the schedule, not on every pass. Any healthy voter can serve one.
 */
function backups(view: ClusterView, out: CarePlan): void {
  const schedule = view.spec.backup;
  const seen = view.observed.care?.backups;
  if (!seen) return;
  const last = seen.lastAttempt;
  if (last?.ok === false) {
    out.conditions.push({ type: 'BackupFailing', status: 'True', reason: 'BackupFailed', message: `the backup at ${iso(last.at)} failed: ${last.message}` });
  } else if (schedule || last) {
    const latest = seen.latestAt === undefined ? 'none yet' : `latest at ${iso(seen.latestAt)}`;
    out.conditions.push({ type: 'BackupFailing', status: 'False', reason: 'BackupsTaken', message: `${String(seen.count)} backups, ${latest}` });
  }
  if (!schedule) return;
  const since = Math.max(seen.latestAt ?? -Infinity, last?.at ?? -Infinity);
  const dueIn = since === -Infinity ? 0 : since + schedule.everyMs - view.now;
  out.nextDueInMs = Math.max(0, dueIn);
  if (dueIn > 0) return;
  if (!view.membersKnown || !view.hasQuorum) {
    out.waits.push({ code: 'BackupDeferred', message: 'a scheduled backup is due; waiting for a healthy voter to take it from' });
    return;
  }
  out.actions.push({ kind: 'TakeBackup', keep: schedule.keep, reason: since === -Infinity ? 'FirstScheduledBackup' : 'BackupDue' });
}

/**
 * A NOSPACE alarm makes etcd refuse writes until it is disarmed, and disarming helps only once space is
 * free again: compact all history, defragment every member one at a time, then disarm. Needs quorum
 * (compaction is a write through raft) and no learner joining (the defragmentation's health gate).
 */
function noSpace(view: ClusterView, out: CarePlan, membershipBusy: boolean): void {
  const raised = view.observed.alarms.filter((a) => a.alarm === 'NOSPACE');
  if (raised.length === 0) return;
  const members = raised.map((a) => view.members.find((m) => m.id === a.memberId)?.name || a.memberId).join(', ');
  const steps = 'compact all history, defragment every member (leader last), disarm';
  if (!view.membersKnown || !view.hasQuorum || view.learners.length > 0 || membershipBusy) {
    out.waits.push({ code: 'NoSpaceAlarm', message: `NOSPACE alarm raised on ${members}: etcd refuses writes; recovery (${steps}) waits for a quorum of healthy voters and no learner joining` });
    return;
  }
  out.waits.push({ code: 'NoSpaceAlarm', message: `NOSPACE alarm raised on ${members}: etcd refuses writes; recovering: ${steps}` });
  out.actions.push({ kind: 'RecoverNoSpace', reason: 'NoSpaceAlarm' });
}

/**
 * The condition 30 days ahead of the first expiry; the renewal itself only on a converged cluster, and
 * only when no rolling job runs (`busy`).
 */
function certificates(view: ClusterView, out: CarePlan, converged: boolean, busy = false): void {
  const certs = view.observed.care?.certificates;
  if (!certs) return;
  const left = certs.earliestExpiry - view.now;
  const soon = left <= CERTIFICATE_RENEW_BEFORE_MS;
  const when = `${certs.file} expires first, at ${iso(certs.earliestExpiry)}`;
  out.conditions.push({
    type: 'CertificatesExpiringSoon',
    status: soon ? 'True' : 'False',
    reason: soon ? (left <= 0 ? 'CertificatesExpired' : 'RenewalDue') : 'CertificatesValid',
    message: soon ? `${when}: renewing (members restarted one at a time)` : when,
  });
  if (!soon || busy) return;
  // A renewal restarts every member: never on top of a membership change, a repair or an alarm.
  if (!converged) {
    out.waits.push({ code: 'CertificateRenewalDeferred', message: `${when}; renewal waits until the cluster has converged` });
    return;
  }
  out.actions.push({ kind: 'RenewCertificates', reason: left <= 0 ? 'CertificatesExpired' : 'CertificatesExpiringSoon' });
}

/**
 * Routine maintenance, due `every` after the last attempt (or after the init): only on a converged
 * cluster, since defragmentation pauses each member in turn behind the health gate. A failure is an
 * event and waits for the next slot, like a backup.
 */
function maintenance(view: ClusterView, out: CarePlan, converged: boolean): void {
  const schedule = view.spec.maintenance;
  const care = view.observed.care;
  const since = care?.lastMaintenance?.at ?? view.observed.initializedAt;
  if (!schedule || !care || since === undefined) return;
  const dueIn = since + schedule.everyMs - view.now;
  out.nextDueInMs = Math.min(out.nextDueInMs ?? Infinity, Math.max(0, dueIn));
  if (dueIn > 0) return;
  if (!converged) {
    out.waits.push({ code: 'MaintenanceDeferred', message: 'scheduled maintenance is due; it waits until the cluster has converged' });
    return;
  }
  out.actions.push({ kind: 'RunMaintenance', retainRevisions: schedule.retainRevisions, fragmentationThreshold: schedule.fragmentationThreshold, reason: 'MaintenanceDue' });
}

const JOB_TITLES: Record<CareJobKind, string> = { RenewCertificates: 'certificate renewal', RunMaintenance: 'maintenance', RecoverNoSpace: 'NOSPACE recovery' };

function jobAction(job: CareJobRecord): CareAction {
  if (job.kind === 'RunMaintenance') return { kind: job.kind, retainRevisions: job.retainRevisions ?? 0, fragmentationThreshold: job.fragmentationThreshold ?? 0, reason: job.reason };
  return { kind: job.kind, reason: job.reason };
}

/**
 * A rolling job on record is carried on, one step per pass, before any other restart-like job starts;
 * a membership change or a lost quorum pauses it (its steps would only wait). What it waits for is a
 * wait of the decision, so `status --explain` shows it.
 */
function carryOn(view: ClusterView, out: CarePlan, job: CareJobRecord, membershipBusy: boolean): void {
  const title = JOB_TITLES[job.kind];
  if (!view.membersKnown || !view.hasQuorum || membershipBusy) {
    out.waits.push({ code: 'CareJobPaused', message: `${title} (started ${iso(job.startedAt)}) waits for a quorum of healthy voters and no membership change` });
    return;
  }
  out.actions.push(jobAction(job));
  const waiting = job.waiting;
  out.waits.push(waiting ? { code: waiting.reason, message: `${title}: ${waiting.message}` } : { code: 'CareJobRunning', message: `${title} in progress (${job.stage})` });
  out.nextDueInMs = Math.min(out.nextDueInMs ?? Infinity, waiting?.retryAfterMs ?? 0);
}

/** Day-2 care from the observation: backups on schedule, NOSPACE recovery, certificate renewal, maintenance. Pure. */
export function planCare(view: ClusterView, state: { converged: boolean; membershipBusy: boolean }): CarePlan {
  const out: CarePlan = { actions: [], waits: [], conditions: [] };
  backups(view, out);
  const job = view.observed.care?.job;
  if (job) {
    carryOn(view, out, job, state.membershipBusy);
    if (view.observed.alarms.some((a) => a.alarm === 'NOSPACE') && job.kind !== 'RecoverNoSpace') out.waits.push({ code: 'NoSpaceAlarm', message: `NOSPACE alarm raised: recovery waits for the ${JOB_TITLES[job.kind]} in progress` });
    certificates(view, out, false, true);
    return out;
  }
  noSpace(view, out, state.membershipBusy);
  certificates(view, out, state.converged);
  // One restart-like job at a time: a renewal already rolls every member.
  if (!out.actions.some((a) => a.kind === 'RenewCertificates' || a.kind === 'RecoverNoSpace')) maintenance(view, out, state.converged);
  return out;
}

/** A rolling job runs (or is about to start): until it ends, the cluster has not converged. */
export function careJobBusy(care: CarePlan): boolean {
  return care.actions.some((a) => a.kind in JOB_TITLES);
}

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { startCareJob, type CareJobRecord } from '../../src/domain/care-job.ts';
import { CERTIFICATE_RENEW_BEFORE_MS } from '../../src/planner/care.ts';
import { plan } from '../../src/planner/plan.ts';
import type { CareAction, ConditionType, Decision, Observed, ObservedCare } from '../../src/planner/types.ts';
import { healthyCluster, healthyObserved, machine, memberIdOf, NOW, observed, spec, voter } from '../support/observed.ts';

const EVERY = 2000;
const DAY = 86_400_000;
const scheduled = spec({ backup: { everyMs: EVERY, keep: 3 } });

function withCare(o: Observed, care: ObservedCare): Observed {
  return { ...o, care };
}

function careKinds(d: Decision): CareAction['kind'][] {
  return (d.careActions ?? []).map((a) => a.kind);
}

function conditionOf(d: Decision, type: ConditionType): Decision['conditions'][number] | undefined {
  return d.conditions.find((c) => c.type === type);
}

describe('planner: scheduled backups', () => {
  test('due from the newest backup or the last attempt, whichever is later; converged either way', () => {
    const cases: { name: string; backups: NonNullable<ObservedCare['backups']>; due: boolean }[] = [
      { name: 'no backup yet', backups: { count: 0 }, due: true },
      { name: 'newest just taken', backups: { count: 1, latestAt: NOW - 500 }, due: false },
      { name: 'newest older than every', backups: { count: 1, latestAt: NOW - EVERY }, due: true },
      { name: 'a failed attempt just now holds the retry to the schedule', backups: { count: 1, latestAt: NOW - 10 * EVERY, lastAttempt: { at: NOW - 100, ok: false, message: 'EACCES' } }, due: false },
      { name: 'a failed attempt one period ago', backups: { count: 1, latestAt: NOW - 10 * EVERY, lastAttempt: { at: NOW - EVERY, ok: false, message: 'EACCES' } }, due: true },
    ];
    for (const c of cases) {
      const d = plan(scheduled, withCare(healthyObserved(3), { backups: c.backups }), NOW);
      assert.deepEqual(careKinds(d), c.due ? ['TakeBackup'] : [], c.name);
      assert.equal(d.converged, true, `${c.name}: care does not count against convergence`);
      if (!c.due) assert.ok(d.requeueAfterMs <= EVERY, `${c.name}: looks again by the time the next one is due`);
    }
  });

  test('no schedule, nothing taken; no quorum, the backup waits', () => {
    assert.deepEqual(careKinds(plan(spec(), withCare(healthyObserved(3), { backups: { count: 0 } }), NOW)), []);
    const { machines, members } = healthyCluster(3);
    const down = members.map((m, i) => (i === 0 ? m : { ...m, status: { ok: false as const, error: 'timeout' } }));
    const d = plan(scheduled, withCare(observed({ machines, members: down }), { backups: { count: 0 } }), NOW);
    assert.deepEqual(careKinds(d), []);
    assert.ok(d.waits.some((w) => w.code === 'BackupDeferred'), JSON.stringify(d.waits));
  });

  test('BackupFailing is True after a failed attempt, with its message, and False after a good one', () => {
    const failing = plan(scheduled, withCare(healthyObserved(3), { backups: { count: 2, latestAt: NOW - 5000, lastAttempt: { at: NOW - 100, ok: false, message: 'permission denied' } } }), NOW);
    assert.equal(conditionOf(failing, 'BackupFailing')?.status, 'True');
    assert.match(conditionOf(failing, 'BackupFailing')?.message ?? '', /permission denied/);
    const fine = plan(scheduled, withCare(healthyObserved(3), { backups: { count: 3, latestAt: NOW - 100, lastAttempt: { at: NOW - 100, ok: true, message: 'ok' } } }), NOW);
    assert.equal(conditionOf(fine, 'BackupFailing')?.status, 'False');
  });
});

describe('planner: certificates expiring soon', () => {
  test('True 30 days ahead of the first expiry; renewed only on a converged cluster', () => {
    const file = '/pki/t-1/server.crt';
    const far = plan(spec(), withCare(healthyObserved(3), { certificates: { earliestExpiry: NOW + CERTIFICATE_RENEW_BEFORE_MS + DAY, file } }), NOW);
    assert.equal(conditionOf(far, 'CertificatesExpiringSoon')?.status, 'False');
    assert.deepEqual(careKinds(far), []);
    const soon = plan(spec(), withCare(healthyObserved(3), { certificates: { earliestExpiry: NOW + CERTIFICATE_RENEW_BEFORE_MS - DAY, file } }), NOW);
    assert.equal(conditionOf(soon, 'CertificatesExpiringSoon')?.status, 'True');
    assert.match(conditionOf(soon, 'CertificatesExpiringSoon')?.message ?? '', /server\.crt/);
    assert.deepEqual(careKinds(soon), ['RenewCertificates']);
    // Scaling up: the renewal, which restarts every member, waits.
    const scaling = plan(spec({ replicas: 5 }), withCare(healthyObserved(3), { certificates: { earliestExpiry: NOW + DAY, file } }), NOW);
    assert.deepEqual(careKinds(scaling), []);
    assert.ok(scaling.waits.some((w) => w.code === 'CertificateRenewalDeferred'));
  });
});

describe('planner: NOSPACE alarm', () => {
  test('recovery is planned with its reasons while the alarm is raised and quorum holds; the cluster is not converged', () => {
    const alarms = [{ memberId: memberIdOf('t-1'), alarm: 'NOSPACE' as const }];
    const d = plan(spec(), observed({ ...healthyCluster(3), alarms }), NOW);
    assert.deepEqual(careKinds(d), ['RecoverNoSpace']);
    assert.equal(d.converged, false);
    const wait = d.waits.find((w) => w.code === 'NoSpaceAlarm');
    assert.match(wait?.message ?? '', /compact all history, defragment every member \(leader last\), disarm/);
    // A learner joining: the defragmentation's health gate would refuse, so recovery waits.
    const { machines, members } = healthyCluster(3);
    const joining = observed({ machines: [...machines, machine('t-4', { phase: 'Learner' })], members: [...members, { ...voter('t-4'), isLearner: true }], alarms });
    assert.deepEqual(careKinds(plan(spec({ replicas: 5 }), joining, NOW)), []);
  });
});

describe('planner: scheduled maintenance', () => {
  const maintained = spec({ maintenance: { everyMs: EVERY, retainRevisions: 100, fragmentationThreshold: 0.4 } });
  const since = (initializedAt: number, care: ObservedCare = {}): Observed => ({ ...withCare(healthyObserved(3), care), initializedAt });

  test('due `every` after the init or the last attempt, with the spec settings; not converged while it runs', () => {
    const early = plan(maintained, since(NOW - 500), NOW);
    assert.deepEqual(careKinds(early), []);
    assert.ok(early.requeueAfterMs <= EVERY - 500, 'looks again when it is due');
    const due = plan(maintained, since(NOW - EVERY), NOW);
    assert.deepEqual(due.careActions, [{ kind: 'RunMaintenance', retainRevisions: 100, fragmentationThreshold: 0.4, reason: 'MaintenanceDue' }]);
    assert.equal(due.converged, false, 'a rolling job is carried on pass by pass until it ends');
    const justRan = plan(maintained, since(NOW - 10 * EVERY, { lastMaintenance: { at: NOW - 100, ok: false, message: 'timeout' } }), NOW);
    assert.deepEqual(careKinds(justRan), [], 'a failed attempt waits for the next slot');
  });

  test('never before the init, never on a cluster that has not converged, never beside a certificate renewal', () => {
    assert.deepEqual(careKinds(plan(maintained, withCare(healthyObserved(3), {}), NOW)), [], 'no init time: nothing to count from');
    const growing = plan(spec({ replicas: 5, maintenance: { everyMs: EVERY, retainRevisions: 100, fragmentationThreshold: 0.4 } }), since(NOW - EVERY), NOW);
    assert.ok(!careKinds(growing).includes('RunMaintenance'));
    assert.ok(growing.waits.some((w) => w.code === 'MaintenanceDeferred'), JSON.stringify(growing.waits));
    const expiring = plan(maintained, since(NOW - EVERY, { certificates: { earliestExpiry: NOW + DAY, file: 'ca.crt' } }), NOW);
    assert.deepEqual(careKinds(expiring), ['RenewCertificates']);
  });
});

describe('planner: a rolling care job on record', () => {
  const waiting = (job: CareJobRecord): CareJobRecord => ({ ...job, stage: 'members', waiting: { reason: 'VoterNotBack', message: 'voter t-2 is not back: does not answer', retryAfterMs: 200 } });
  const renewal = waiting(startCareJob('RenewCertificates', 'CertificatesExpiringSoon', NOW - 5000));

  test('is carried on with its own reason; what it waits for is a wait of the decision; not converged; looked at again when it asked', () => {
    const d = plan(spec(), withCare(healthyObserved(3), { job: renewal }), NOW);
    assert.deepEqual(d.careActions, [{ kind: 'RenewCertificates', reason: 'CertificatesExpiringSoon' }]);
    const wait = d.waits.find((w) => w.code === 'VoterNotBack');
    assert.match(wait?.message ?? '', /^certificate renewal: voter t-2 is not back/);
    assert.equal(d.converged, false);
    assert.ok(d.requeueAfterMs <= 200, String(d.requeueAfterMs));
    const maintenance = waiting(startCareJob('RunMaintenance', 'MaintenanceDue', NOW - 5000, { retainRevisions: 10, fragmentationThreshold: 0.2 }));
    assert.deepEqual(plan(spec(), withCare(healthyObserved(3), { job: maintenance }), NOW).careActions, [{ kind: 'RunMaintenance', retainRevisions: 10, fragmentationThreshold: 0.2, reason: 'MaintenanceDue' }]);
  });

  test('carried on while a member it restarted is not back, though the cluster has not converged', () => {
    const { machines, members } = healthyCluster(3);
    const restarting = members.map((m, i) => (i === 1 ? { ...m, status: { ok: false as const, error: 'connection refused' } } : m));
    const d = plan(spec(), withCare(observed({ machines, members: restarting }), { job: renewal }), NOW);
    assert.deepEqual(careKinds(d), ['RenewCertificates']);
  });

  test('paused by a membership change and by a lost quorum, saying so', () => {
    const { machines, members } = healthyCluster(3);
    const joining = observed({ machines: [...machines, machine('t-4', { phase: 'Learner' })], members: [...members, { ...voter('t-4'), isLearner: true }] });
    const scaling = plan(spec({ replicas: 5 }), withCare(joining, { job: renewal }), NOW);
    assert.ok(scaling.membershipAction, 'a membership change is planned');
    assert.deepEqual(careKinds(scaling), []);
    assert.ok(scaling.waits.some((w) => w.code === 'CareJobPaused'), JSON.stringify(scaling.waits));
    const down = members.map((m, i) => (i === 0 ? m : { ...m, status: { ok: false as const, error: 'timeout' } }));
    assert.deepEqual(careKinds(plan(spec(), withCare(observed({ machines, members: down }), { job: renewal }), NOW)), []);
  });

  test('no other restart-like job starts beside it; the certificates condition stays; backups go on', () => {
    const care: ObservedCare = { job: renewal, certificates: { earliestExpiry: NOW + DAY, file: 'ca.crt' }, backups: { count: 0 } };
    const maintained = spec({ backup: { everyMs: EVERY, keep: 3 }, maintenance: { everyMs: EVERY, retainRevisions: 100, fragmentationThreshold: 0.4 } });
    const d = plan(maintained, { ...withCare(healthyObserved(3), care), initializedAt: NOW - 10 * EVERY }, NOW);
    assert.deepEqual(careKinds(d).sort(), ['RenewCertificates', 'TakeBackup']);
    assert.equal(conditionOf(d, 'CertificatesExpiringSoon')?.status, 'True');
    const alarms = [{ memberId: memberIdOf('t-1'), alarm: 'NOSPACE' as const }];
    const maintenance = waiting(startCareJob('RunMaintenance', 'MaintenanceDue', NOW - 5000, { retainRevisions: 10, fragmentationThreshold: 0.2 }));
    const full = plan(spec(), withCare(observed({ ...healthyCluster(3), alarms }), { job: maintenance }), NOW);
    assert.deepEqual(careKinds(full), ['RunMaintenance'], 'NOSPACE recovery waits for the job in progress');
    assert.ok(full.waits.some((w) => w.code === 'NoSpaceAlarm'));
  });
});

describe('planner: a cluster version pinned below the members', () => {
  test('below every voter\'s minor with no downgrade wanted: ClusterVersionPinned, not converged, CancelDowngrade once all else settled', () => {
    const current = plan(spec(), withCare(healthyObserved(3), { clusterVersion: '3.4.0' }), NOW);
    assert.deepEqual([conditionOf(current, 'ClusterVersionPinned')?.status, conditionOf(current, 'ClusterVersionPinned')?.reason, current.converged, careKinds(current)], ['False', 'ClusterVersionCurrent', true, []]);

    const pinned = plan(spec(), withCare(healthyObserved(3), { clusterVersion: '3.3.0' }), NOW);
    assert.deepEqual([conditionOf(pinned, 'ClusterVersionPinned')?.status, conditionOf(pinned, 'ClusterVersionPinned')?.reason, pinned.converged, careKinds(pinned)], ['True', 'DowngradeLeftEnabled', false, ['CancelDowngrade']]);

    const { machines, members } = healthyCluster(3);
    const down = members.map((m, i) => (i === 2 ? { ...m, status: { ok: false as const, error: 'timeout' } } : m));
    const unsettled = plan(spec(), withCare(observed({ machines, members: down }), { clusterVersion: '3.3.0' }), NOW);
    assert.deepEqual(careKinds(unsettled), [], 'a voter that does not answer: its minor is unknown, nothing is cancelled');

    assert.equal(conditionOf(plan(spec(), withCare(healthyObserved(3), {}), NOW), 'ClusterVersionPinned'), undefined, 'no reading, no condition');
  });
});

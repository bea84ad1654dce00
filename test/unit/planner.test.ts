import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { plan } from '../../src/planner/plan.ts';
import { REQUEUE } from '../../src/planner/requeue.ts';
import type { ConditionType, Decision, MachineAction, Observed, ObservedMember, PlannerSpec } from '../../src/planner/types.ts';
import {
  healthyCluster,
  healthyObserved,
  learner,
  machine,
  memberIdOf,
  NOW,
  observed,
  spec,
  voter,
  type MachineOptions,
} from '../support/observed.ts';

// ---------------------------------------------------------------- helpers

function decide(o: Observed, s: PlannerSpec = spec(), now = NOW): Decision {
  return plan(s, o, now);
}

/** Machine names of the machine actions of one kind, in decision order. */
function machinesOf(d: Decision, kind: MachineAction['kind']): string[] {
  return d.machineActions.filter((a) => a.kind === kind).map((a) => a.machine);
}

function waitCodes(d: Decision): string[] {
  return d.waits.map((w) => w.code);
}

function waitOf(d: Decision, code: string): Decision['waits'][number] {
  const w = d.waits.find((x) => x.code === code);
  assert.ok(w, `expected a ${code} wait, got ${JSON.stringify(d.waits)}`);
  return w;
}

function conditionOf(d: Decision, type: ConditionType): Decision['conditions'][number] {
  const c = d.conditions.find((x) => x.type === type);
  assert.ok(c, `no ${type} condition`);
  return c;
}

const MEMBERSHIP_KINDS = new Set(['InitCluster', 'AddLearner', 'StartMember', 'PromoteLearner', 'MoveLeader', 'RemoveMember']);

function assertNoMembershipInMachineActions(d: Decision): void {
  for (const a of d.machineActions) assert.ok(!MEMBERSHIP_KINDS.has(a.kind), `membership action ${a.kind} among machine actions`);
}

const NEW = '3.7.4';

// ---------------------------------------------------------------- scale up

describe('planner: scale up', () => {
  test('creates every missing machine at once when strategy is parallel', () => {
    const cases: { name: string; o: Observed; s: PlannerSpec; machines: string[]; reason: string }[] = [
      { name: 'empty cluster', o: observed(), s: spec(), machines: ['t-1', 't-2', 't-3'], reason: 'Initialize' },
      { name: '3 voters, 5 wanted', o: healthyObserved(3), s: spec({ replicas: 5 }), machines: ['t-4', 't-5'], reason: 'ScaleUp' },
      {
        name: 'freed ordinals are reused, lowest first, then fresh ones',
        o: observed({ ...healthyCluster(3, { from: 3 }), nextOrdinal: 7, initMachine: 't-3' }),
        s: spec({ replicas: 7 }),
        machines: ['t-1', 't-2', 't-6', 't-7'],
        reason: 'ScaleUp',
      },
    ];
    for (const c of cases) {
      const d = decide(c.o, c.s);
      assert.deepEqual(machinesOf(d, 'CreateMachine'), c.machines, c.name);
      for (const a of d.machineActions) {
        if (a.kind === 'CreateMachine') {
          assert.equal(a.reason, c.reason, c.name);
          assert.equal(a.machine, `t-${String(a.ordinal)}`, c.name);
        }
      }
      assert.equal(d.membershipAction, undefined, c.name);
    }
  });

  test('reuses a freed ordinal only when no member and no recorded init machine can be mistaken for the new machine', () => {
    // t-2 and t-4 were removed and deleted; t-1 was the init machine (its name is recorded for good).
    const c = healthyCluster(2, { from: 5 });
    c.machines.push(machine('t-3', { phase: 'Voter' }));
    c.members.push(voter('t-3', { leader: memberIdOf('t-5') }));
    const base = { machines: c.machines, nextOrdinal: 7, initMachine: 't-1' };
    const cases: { name: string; o: Observed; machines: string[] }[] = [
      { name: 'every member has its machine record: lowest free, skipping the init machine', o: observed({ ...base, members: c.members }), machines: ['t-2', 't-4'] },
      {
        name: 'a member whose machine record is gone may hold a freed peer URL: fresh ordinals only',
        o: observed({ ...base, members: [...c.members, voter('t-4', { leader: memberIdOf('t-5') })] }),
        machines: ['t-7', 't-8'],
      },
      { name: 'the member list cannot be read: fresh ordinals only', o: observed({ ...base, members: 'context deadline exceeded' }), machines: ['t-7', 't-8'] },
    ];
    for (const k of cases) assert.deepEqual(machinesOf(decide(k.o, spec({ replicas: 5 })), 'CreateMachine'), k.machines, k.name);
  });

  test('the first machine to finish provisioning initializes the cluster', () => {
    const o = observed({
      machines: [
        machine('t-1', { phase: 'Provisioning' }),
        machine('t-2', { provisionedAt: NOW - 500 }),
        machine('t-3', { provisionedAt: NOW - 2000 }),
      ],
    });
    const d = decide(o);
    assert.deepEqual(d.membershipAction, { kind: 'InitCluster', machine: 't-3', reason: 'FirstMachineProvisioned' });
    assert.deepEqual(d.machineActions, []);

    const none = decide(observed({ machines: [machine('t-1', { phase: 'Provisioning' }), machine('t-2', { phase: 'Provisioning' }), machine('t-3', { phase: 'Provisioning' })] }));
    assert.equal(none.membershipAction, undefined);
    assert.deepEqual(waitCodes(none), ['WaitingForFirstMachine']);
  });

  test('never initializes twice once an init machine is recorded', () => {
    const cases: { name: string; o: Observed; expect: string | undefined }[] = [
      {
        name: 'init member crashed before the member list could be read: restart it, never re-init',
        o: observed({
          machines: [machine('t-1', { phase: 'Initializing', memberRunning: false, memberStartedAt: NOW - 5000 }), machine('t-2'), machine('t-3')],
          members: 'no member process is running',
          initMachine: 't-1',
        }),
        expect: 'StartMember',
      },
      {
        name: 'init recorded but the member list reads empty',
        o: observed({ machines: [machine('t-1'), machine('t-2'), machine('t-3')], members: [], initMachine: 't-1' }),
        expect: undefined,
      },
      {
        name: 'init member running, other machines provisioned',
        o: observed({ machines: [machine('t-1', { phase: 'Initializing' }), machine('t-2'), machine('t-3')], members: [], initMachine: 't-1' }),
        expect: undefined,
      },
    ];
    for (const c of cases) {
      const d = decide(c.o);
      assert.notEqual(d.membershipAction?.kind, 'InitCluster', c.name);
      assert.equal(d.membershipAction?.kind, c.expect, c.name);
    }
    const restart = decide(cases[0]!.o);
    assert.deepEqual(restart.membershipAction, { kind: 'StartMember', machine: 't-1', initialClusterState: 'new', reason: 'RestartInitMember' });
  });

  test('an init member that never starts: failed after learnerStuckAfter, deleted, then its init abandoned, then another machine initializes', () => {
    const stuckAfter = spec().remediation.learnerStuckAfterMs;
    const initAt = (at: number): Observed['machines'][number] => {
      const m = machine('t-1', { memberRunning: false, memberStartedAt: NOW - 5000 });
      m.record.initRecordedAt = at;
      return m;
    };
    const unreadable = 'no member process is running';
    const early = decide(observed({ machines: [initAt(NOW - stuckAfter + 1000), machine('t-2'), machine('t-3')], members: unreadable, initMachine: 't-1' }));
    assert.deepEqual(early.membershipAction, { kind: 'StartMember', machine: 't-1', initialClusterState: 'new', reason: 'RestartInitMember' });
    assert.ok(!early.machineActions.some((a) => a.kind === 'MarkMachineFailed'), 'within learnerStuckAfter it only restarts');

    const late = decide(observed({ machines: [initAt(NOW - stuckAfter), machine('t-2'), machine('t-3')], members: unreadable, initMachine: 't-1' }));
    assert.ok(late.machineActions.some((a) => a.kind === 'MarkMachineFailed' && a.machine === 't-1' && a.reason === 'InitMemberNeverStarted'));
    assert.ok(late.machineActions.some((a) => a.kind === 'DeleteMachine' && a.machine === 't-1'), 'deleted in the same pass: it never joined');
    assert.equal(late.membershipAction, undefined, 'neither restarted nor re-initialized while it is being deleted');
    assert.ok(!late.machineActions.some((a) => a.kind === 'AbandonInit'), 'abandoned only once its record is gone');

    const gone = decide(observed({ machines: [machine('t-2'), machine('t-3')], members: unreadable, initMachine: 't-1' }));
    assert.deepEqual(gone.machineActions.filter((a) => a.kind === 'AbandonInit'), [{ kind: 'AbandonInit', machine: 't-1', reason: 'InitMachineDeleted' }]);
    assert.equal(gone.membershipAction, undefined, 'no InitCluster in the pass that abandons');

    const next = decide(observed({ machines: [machine('t-2'), machine('t-3')], members: [], initMachine: undefined }));
    assert.deepEqual(next.membershipAction, { kind: 'InitCluster', machine: 't-2', reason: 'FirstMachineProvisioned' });
  });

  test('an init is never abandoned once the cluster was initialized or any machine has been a member', () => {
    const initialized = observed({ machines: [machine('t-2'), machine('t-3')], members: 'no member process is running', initMachine: 't-1' });
    initialized.initializedAt = NOW - 60_000;
    assert.ok(!decide(initialized).machineActions.some((a) => a.kind === 'AbandonInit'));
    const member = machine('t-2', { memberRunning: false });
    member.record.memberId = 'abc';
    const joined = observed({ machines: [member, machine('t-3')], members: 'no member process is running', initMachine: 't-1' });
    assert.ok(!decide(joined).machineActions.some((a) => a.kind === 'AbandonInit'));
    const stuck = machine('t-1', { memberRunning: false, memberStartedAt: NOW - 1000 });
    stuck.record.initRecordedAt = NOW - 3_600_000;
    const afterInit = observed({ machines: [stuck, machine('t-2'), machine('t-3')], members: 'no member process is running', initMachine: 't-1' });
    afterInit.initializedAt = NOW - 3_000_000;
    assert.ok(!decide(afterInit).machineActions.some((a) => a.kind === 'MarkMachineFailed'), 'an initialized cluster\'s init member is restarted, never replaced');
  });

  test('never initializes while the member list cannot be read (invariant 1: only when no member exists)', () => {
    // With an unreadable list the planner cannot know that no member exists.
    const o = observed({ machines: [machine('t-1'), machine('t-2'), machine('t-3')], members: 'context deadline exceeded', initMachine: undefined });
    const d = decide(o);
    assert.equal(d.membershipAction, undefined);
    assert.ok(waitCodes(d).includes('MemberListUnavailable'), JSON.stringify(d.waits));
  });

  test('joins the earliest provisioned machine as a learner once preflight passes', () => {
    const c = healthyCluster(1);
    const o = observed({
      machines: [...c.machines, machine('t-2', { provisionedAt: NOW - 1000 }), machine('t-3', { provisionedAt: NOW - 5000 })],
      members: c.members,
    });
    const d = decide(o);
    assert.deepEqual(d.membershipAction, { kind: 'AddLearner', machine: 't-3', reason: 'JoinNextMachine' });
    assert.deepEqual(d.machineActions, []);
  });

  test('adds no learner while the learner slot is taken (maxLearners 1)', () => {
    const c = healthyCluster(3);
    const o = observed({
      machines: [...c.machines, machine('t-4', { phase: 'Learner' }), machine('t-5')],
      members: [...c.members, learner('t-4', { raftAppliedIndex: 1200 })],
    });
    const one = decide(o, spec({ replicas: 5 }));
    assert.equal(one.membershipAction, undefined);
    assert.deepEqual(waitOf(one, 'LearnerCatchingUp').machine, 't-4');
    assert.ok(!one.waits.some((w) => w.message.includes('t-5 waits at the join gate')), 'the taken slot is the normal gate, not a complaint');

    // The members run 3.4.23, which allows one learner whatever the spec asks.
    const pinned = decide(o, spec({ replicas: 5, maxLearners: 2 }));
    assert.equal(pinned.membershipAction, undefined);
    assert.deepEqual(waitOf(pinned, 'LearnerCatchingUp').machine, 't-4');
  });

  test('on etcd 3.6 adds a second learner while the first catches up, up to the lowest limit the members run', () => {
    const c = healthyCluster(3, { version: '3.6.17', maxLearners: 2 });
    const o = (limit?: number) =>
      observed({
        machines: [...c.machines, machine('t-4', { phase: 'Learner', version: '3.6.17', ...(limit === undefined ? {} : { maxLearners: limit }) }), machine('t-5', { version: '3.6.17' })],
        members: [...c.members, learner('t-4', { raftAppliedIndex: 1200, version: '3.6.17' })],
      });
    const s = spec({ replicas: 5, version: '3.6.17', maxLearners: 2 });
    assert.deepEqual(decide(o(2), s).membershipAction, { kind: 'AddLearner', machine: 't-5', reason: 'JoinNextMachine' });
    // A running member recorded without a limit (started by an older fastplane) holds it at 1.
    assert.equal(decide(o(), s).membershipAction, undefined);
    // The spec asks for more than the voters run (a change of the setting, not rolled yet): theirs holds.
    assert.equal(decide(o(2), spec({ replicas: 5, version: '3.6.17', maxLearners: 3 })).membershipAction?.kind, 'AddLearner');
    const three = healthyCluster(3, { version: '3.6.17', maxLearners: 1 });
    const held = decide(observed({ machines: [...three.machines, machine('t-4', { phase: 'Learner', version: '3.6.17', maxLearners: 3 }), machine('t-5', { version: '3.6.17' })], members: [...three.members, learner('t-4', { raftAppliedIndex: 1200, version: '3.6.17' })] }), spec({ replicas: 5, version: '3.6.17', maxLearners: 3 }));
    assert.equal(held.membershipAction, undefined, 'voters started with --max-learners 1 refuse a second learner');
  });

  test('on etcd 3.6 adds the next learner only once every learner added has started and named itself', () => {
    const c = healthyCluster(3, { version: '3.6.17', maxLearners: 8 });
    const o = (t4: ObservedMember) =>
      observed({
        machines: [...c.machines, machine('t-4', { phase: 'Joining', version: '3.6.17', maxLearners: 8 }), machine('t-5', { version: '3.6.17' })],
        members: [...c.members, t4],
      });
    const s = spec({ replicas: 5, version: '3.6.17', maxLearners: 8 });
    // Added, its process not yet past its first boot: it still needs the membership it was given.
    const unstarted = decide(o({ ...learner('t-4', { statusError: 'connection refused', version: '3.6.17' }), name: '', clientURLs: [] }), s);
    assert.equal(unstarted.membershipAction, undefined);
    assert.match(waitOf(unstarted, 'LearnerNotStarted').message, /t-5 waits at the join gate: learner t-4 has not started yet/);
    // Named in the member list (it read the membership), still catching up: the next one joins.
    const started = decide(o(learner('t-4', { statusError: 'context deadline exceeded', version: '3.6.17' })), s);
    assert.deepEqual(started.membershipAction, { kind: 'AddLearner', machine: 't-5', reason: 'JoinNextMachine' });
  });

  test('promotes only when the learner answers and is within the catch-up margin', () => {
    const cases: { name: string; learner: Parameters<typeof learner>[1]; expect: string }[] = [
      { name: 'fully applied', learner: { raftAppliedIndex: 1350 }, expect: 'PromoteLearner' },
      { name: 'exactly at the margin (10 behind)', learner: { raftAppliedIndex: 1340 }, expect: 'PromoteLearner' },
      { name: 'one past the margin', learner: { raftAppliedIndex: 1339 }, expect: 'LearnerCatchingUp' },
      { name: 'status call fails', learner: { statusError: 'context deadline exceeded' }, expect: 'LearnerStarting' },
      { name: 'knows no leader', learner: { leader: '0', raftAppliedIndex: 1350 }, expect: 'LearnerStarting' },
      { name: 'reports errors', learner: { errors: ['etcdserver: no leader'], raftAppliedIndex: 1350 }, expect: 'LearnerReportsErrors' },
    ];
    for (const c of cases) {
      const base = healthyCluster(2);
      const o = observed({ machines: [...base.machines, machine('t-3', { phase: 'Learner' })], members: [...base.members, learner('t-3', c.learner)] });
      const d = decide(o);
      if (c.expect === 'PromoteLearner') {
        assert.deepEqual(d.membershipAction, { kind: 'PromoteLearner', machine: 't-3', memberId: memberIdOf('t-3'), reason: 'LearnerCaughtUp' }, c.name);
      } else {
        assert.equal(d.membershipAction, undefined, c.name);
        assert.equal(waitOf(d, c.expect).machine, 't-3', c.name);
      }
    }
  });

  test('reports "waiting for learner t-3 to catch up (applied 1200/1350)"', () => {
    const c = healthyCluster(2);
    const o = observed({ machines: [...c.machines, machine('t-3', { phase: 'Learner' })], members: [...c.members, learner('t-3', { raftAppliedIndex: 1200 })] });
    const d = decide(o);
    assert.deepEqual(d.waits, [{ code: 'LearnerCatchingUp', message: 'waiting for learner t-3 to catch up (applied 1200/1350)', machine: 't-3' }]);
    assert.equal(d.requeueAfterMs, REQUEUE.fast);
  });

  test('serial strategy creates one machine and waits until it is a healthy voter', () => {
    const s = spec({ strategy: 'serial' });
    const empty = decide(observed(), s);
    assert.deepEqual(machinesOf(empty, 'CreateMachine'), ['t-1']);

    const c1 = healthyCluster(1);
    const provisioning = decide(observed({ machines: [...c1.machines, machine('t-2', { phase: 'Provisioning' })], members: c1.members }), s);
    assert.deepEqual(machinesOf(provisioning, 'CreateMachine'), []);

    const learning = decide(
      observed({ machines: [...c1.machines, machine('t-2', { phase: 'Learner' })], members: [...c1.members, learner('t-2', { raftAppliedIndex: 100 })] }),
      s,
    );
    assert.deepEqual(machinesOf(learning, 'CreateMachine'), []);
    assert.ok(waitCodes(learning).includes('SerialWaitingForPrevious'));

    const settled = decide(healthyObserved(2), s);
    assert.deepEqual(machinesOf(settled, 'CreateMachine'), ['t-3']);

    // The same state under the parallel strategy creates everything missing.
    assert.deepEqual(machinesOf(decide(observed(), spec()), 'CreateMachine'), ['t-1', 't-2', 't-3']);
  });

  test('spreads a batch evenly over failure domains', () => {
    const s = spec({ replicas: 5, failureDomains: ['a', 'b', 'c'] });
    const cases: { name: string; o: Observed; expect: (string | undefined)[] }[] = [
      { name: 'empty', o: observed(), expect: ['a', 'b', 'c', 'a', 'b'] },
      { name: 'one in a', o: healthyObserved(1, { failureDomains: ['a'] }), expect: ['b', 'c', 'a', 'b'] },
      { name: 'two in a', o: healthyObserved(2, { failureDomains: ['a'] }), expect: ['b', 'c', 'b'] },
    ];
    for (const c of cases) {
      const d = decide(c.o, s);
      const domains = d.machineActions.flatMap((a) => (a.kind === 'CreateMachine' ? [a.failureDomain] : []));
      assert.deepEqual(domains, c.expect, c.name);
    }
    const noDomains = decide(observed());
    for (const a of noDomains.machineActions) assert.ok(!('failureDomain' in a), 'no failureDomain key without domains');
  });

  test('bounds creations by maxConcurrentProvisioning', () => {
    const s = spec({ replicas: 5, maxConcurrentProvisioning: 2 });
    const first = decide(observed(), s);
    assert.deepEqual(machinesOf(first, 'CreateMachine'), ['t-1', 't-2']);
    assert.equal(waitOf(first, 'ProvisioningBound').message, '0 machines provisioning (maxConcurrentProvisioning 2)');

    const full = decide(observed({ machines: [machine('t-1', { phase: 'Provisioning' }), machine('t-2', { phase: 'Provisioning' })] }), s);
    assert.deepEqual(machinesOf(full, 'CreateMachine'), []);
    assert.equal(waitOf(full, 'ProvisioningBound').message, '2 machines provisioning (maxConcurrentProvisioning 2)');

    const oneDone = decide(observed({ machines: [machine('t-1'), machine('t-2', { phase: 'Provisioning' })] }), s);
    assert.deepEqual(machinesOf(oneDone, 'CreateMachine'), ['t-3']);
  });

  test('holds the join while a voter is unhealthy and names that voter', () => {
    const c = healthyCluster(3);
    const members = [c.members[0]!, c.members[1]!, voter('t-3', { statusError: 'context deadline exceeded' })];
    const d = decide(observed({ machines: [...c.machines, machine('t-4')], members }), spec({ replicas: 5 }));
    assert.notEqual(d.membershipAction?.kind, 'AddLearner');
    assert.deepEqual(waitOf(d, 'VoterUnhealthy'), {
      code: 'VoterUnhealthy',
      message: 't-4 waits at the join gate: voter t-3 is not healthy (context deadline exceeded)',
      machine: 't-3',
    });
    assert.equal(d.requeueAfterMs, REQUEUE.now, 'creations are pending, so look again at once');
  });

  test('preflight waits when voters disagree on the leader / an alarm is raised', () => {
    const c = healthyCluster(3);
    const disputed = [voter('t-1', { leader: memberIdOf('t-1') }), voter('t-2', { leader: memberIdOf('t-2') }), voter('t-3', { leader: memberIdOf('t-1') })];
    const cases: { name: string; o: Observed; code: string; message: string }[] = [
      {
        name: 'leader disputed',
        o: observed({ machines: [...c.machines, machine('t-4')], members: disputed }),
        code: 'LeaderUnknown',
        message: 't-4 waits at the join gate: voters do not agree on a leader',
      },
      {
        name: 'NOSPACE alarm',
        o: observed({ machines: [...c.machines, machine('t-4')], members: c.members, alarms: [{ memberId: memberIdOf('t-2'), alarm: 'NOSPACE' }] }),
        code: 'AlarmActive',
        message: `t-4 waits at the join gate: etcd alarm NOSPACE is raised on member ${memberIdOf('t-2')}`,
      },
    ];
    for (const c2 of cases) {
      const d = decide(c2.o, spec({ replicas: 5 }));
      assert.equal(d.membershipAction, undefined, c2.name);
      assert.equal(waitOf(d, c2.code).message, c2.message, c2.name);
      assert.equal(d.converged, false, c2.name);
    }
  });
});

// ---------------------------------------------------------------- repair

describe('planner: repair', () => {
  test('starts an added-but-unstarted learner with StartMember', () => {
    const c = healthyCluster(2);
    const o = observed({
      machines: [...c.machines, machine('t-3', { phase: 'Joining', memberRunning: false, memberStartedAt: null })],
      members: [...c.members, learner('t-3', { unstarted: true })],
    });
    const d = decide(o);
    assert.deepEqual(d.membershipAction, {
      kind: 'StartMember',
      machine: 't-3',
      memberId: memberIdOf('t-3'),
      initialClusterState: 'existing',
      reason: 'StartAddedLearner',
    });
    assert.deepEqual(d.machineActions, []);
    assert.equal(d.phases['t-3'], 'Joining');
  });

  test('removes an orphan learner (member without machine)', () => {
    const c = healthyCluster(3);
    const orphan = learner('t-9', { id: '9000000000000000009', peerURL: 'http://127.77.1.9:2380' });
    const d = decide(observed({ ...c, members: [...c.members, orphan] }));
    assert.deepEqual(d.membershipAction, { kind: 'RemoveMember', memberId: '9000000000000000009', peerURL: 'http://127.77.1.9:2380', reason: 'RemoveOrphanLearner' });
    assert.deepEqual(d.machineActions, []);
    assert.equal(d.converged, false);
  });

  test('removes an orphan voter while the projected quorum allows it', () => {
    const c = healthyCluster(3);
    const orphan = voter('t-9', { statusError: 'connection refused' });
    const d = decide(observed({ ...c, members: [...c.members, orphan] }));
    assert.deepEqual(d.membershipAction, { kind: 'RemoveMember', memberId: memberIdOf('t-9'), peerURL: 'http://127.77.1.9:2380', reason: 'RemoveOrphanMember' });

    // One healthy voter and two dead orphans: 1 healthy of 3 is no quorum, so nothing may change.
    const c1 = healthyCluster(1);
    const lost = decide(observed({ ...c1, members: [...c1.members, voter('t-8', { statusError: 'x' }), voter('t-9', { statusError: 'x' })] }), spec({ replicas: 1 }));
    assert.equal(lost.membershipAction, undefined);
    assert.equal(lost.blocked?.code, 'QuorumLost');
  });

  test('marks a learner whose process exited as failed and removes it', () => {
    const c = healthyCluster(2);
    const o = observed({
      machines: [...c.machines, machine('t-3', { phase: 'Learner', memberRunning: false, memberStartedAt: NOW - 5000 })],
      members: [...c.members, learner('t-3', { statusError: 'connection refused' })],
    });
    const d = decide(o);
    assert.deepEqual(
      d.machineActions.filter((a) => a.kind === 'MarkMachineFailed'),
      [{ kind: 'MarkMachineFailed', machine: 't-3', reason: 'LearnerExited', message: 'the learner process exited before promotion' }],
    );
    assert.deepEqual(d.membershipAction, {
      kind: 'RemoveMember',
      memberId: memberIdOf('t-3'),
      peerURL: 'http://127.77.1.3:2380',
      machine: 't-3',
      reason: 'RemoveFailedLearner',
    });
    assert.deepEqual(machinesOf(d, 'CreateMachine'), ['t-4'], 'replaced at once');
    assert.deepEqual(machinesOf(d, 'DeleteMachine'), [], 'not deleted while its member exists');
    assert.equal(d.phases['t-3'], 'Failed');
  });

  test('marks a learner with no progress for learnerStuckAfter as failed', () => {
    const cases: { name: string; progressAt: number; stuck: boolean }[] = [
      { name: 'exactly learnerStuckAfter (2m) without progress', progressAt: NOW - 120_000, stuck: true },
      { name: 'well past it', progressAt: NOW - 600_000, stuck: true },
      { name: '1 ms short of it', progressAt: NOW - 119_999, stuck: false },
    ];
    for (const c of cases) {
      const base = healthyCluster(2);
      const o = observed({
        machines: [...base.machines, machine('t-3', { phase: 'Learner', memberStartedAt: NOW - 900_000, learnerProgress: { appliedIndex: 800, at: c.progressAt } })],
        members: [...base.members, learner('t-3', { raftAppliedIndex: 800 })],
      });
      const d = decide(o);
      if (c.stuck) {
        const mark = d.machineActions.find((a) => a.kind === 'MarkMachineFailed');
        assert.equal(mark?.machine, 't-3', c.name);
        assert.equal(mark.reason, 'LearnerStuck', c.name);
        assert.equal(d.membershipAction?.kind, 'RemoveMember', c.name);
      } else {
        assert.deepEqual(machinesOf(d, 'MarkMachineFailed'), [], c.name);
        assert.deepEqual(waitCodes(d), ['LearnerCatchingUp'], c.name);
      }
    }
    // Shorter deadline from the spec applies.
    const base = healthyCluster(2);
    const o = observed({
      machines: [...base.machines, machine('t-3', { phase: 'Learner', memberStartedAt: NOW - 31_000 })],
      members: [...base.members, learner('t-3', { raftAppliedIndex: 5 })],
    });
    assert.deepEqual(machinesOf(decide(o, spec({ remediation: { learnerStuckAfterMs: 30_000 } })), 'MarkMachineFailed'), ['t-3']);
    assert.deepEqual(machinesOf(decide(o), 'MarkMachineFailed'), []);
  });

  test('a caught-up learner on an idle cluster is promoted, not marked stuck', () => {
    // On an idle cluster the applied index stops moving once the learner has caught up; that is done,
    // not stuck (DESIGN: a learner that "stops progressing" toward the leader is stuck).
    const c = healthyCluster(2);
    const o = observed({
      machines: [...c.machines, machine('t-3', { phase: 'Learner', memberStartedAt: NOW - 200_000, learnerProgress: { appliedIndex: 1350, at: NOW - 180_000 } })],
      members: [...c.members, learner('t-3', { raftAppliedIndex: 1350 })],
    });
    const d = decide(o);
    assert.deepEqual(machinesOf(d, 'MarkMachineFailed'), []);
    assert.equal(d.membershipAction?.kind, 'PromoteLearner');
  });
});

// ---------------------------------------------------------------- scale down

describe('planner: scale down', () => {
  test('scale down picks non-members first, then the most crowded failure domain, then the oldest', () => {
    const c = healthyCluster(4, { failureDomains: ['a', 'b', 'c'], leader: 't-2' });
    const o = observed({ machines: [...c.machines, machine('t-5', { failureDomain: 'b' })], members: c.members });
    // t-1 (a), t-2 (b), t-3 (c), t-4 (a) are voters; t-5 (b) is provisioned, not a member.
    const d = decide(o, spec({ replicas: 3, failureDomains: ['a', 'b', 'c'] }));
    assert.deepEqual(
      d.machineActions.filter((a) => a.kind === 'RequestMachineDeletion'),
      [
        { kind: 'RequestMachineDeletion', machine: 't-5', reason: 'ScaleDown' },
        { kind: 'RequestMachineDeletion', machine: 't-1', reason: 'ScaleDown' },
      ],
    );
    assert.deepEqual(machinesOf(d, 'DeleteMachine'), ['t-5'], 'a non-member goes without any membership change');
    assert.deepEqual(d.membershipAction, { kind: 'RemoveMember', memberId: memberIdOf('t-1'), peerURL: 'http://127.77.1.1:2380', machine: 't-1', reason: 'ScaleDown' });
    assert.deepEqual(machinesOf(d, 'CreateMachine'), []);
    const scalingDown = conditionOf(d, 'ScalingDown');
    assert.equal(scalingDown.status, 'True');
  });

  test('moves leadership away before removing the leader', () => {
    const s = spec({ replicas: 1 });
    const first = decide(healthyObserved(3), s);
    assert.deepEqual(machinesOf(first, 'RequestMachineDeletion'), ['t-1', 't-2']);
    assert.deepEqual(first.membershipAction, {
      kind: 'MoveLeader',
      fromMemberId: memberIdOf('t-1'),
      toMemberId: memberIdOf('t-3'),
      machine: 't-3',
      reason: 'BeforeScaleDown',
    });

    const c = healthyCluster(3, { leader: 't-3' });
    c.machines[0] = machine('t-1', { phase: 'Voter', deleteRequested: true });
    c.machines[1] = machine('t-2', { phase: 'Voter', deleteRequested: true });
    const after = decide(observed(c), s);
    assert.deepEqual(after.membershipAction, { kind: 'RemoveMember', memberId: memberIdOf('t-1'), peerURL: 'http://127.77.1.1:2380', machine: 't-1', reason: 'ScaleDown' });
    assert.deepEqual(machinesOf(after, 'DeleteMachine'), []);
  });

  test('removes a voter or moves leadership only while every answering voter names the same leader', () => {
    // Scale 5 -> 3 picks t-1 and t-2. Leadership just moved to t-2, a victim; t-5 has not heard yet
    // and still names t-1. Taken at its word by either side, the planner would remove the real
    // leader (believing t-1) or send MoveLeader to a member that no longer leads (believing t-2).
    const stale = (leader: string) => {
      const c = healthyCluster(5, { leader });
      c.machines[0] = machine('t-1', { phase: 'Voter', deleteRequested: true });
      c.machines[1] = machine('t-2', { phase: 'Voter', deleteRequested: true });
      c.members[4] = voter('t-5', { leader: memberIdOf('t-1') });
      return observed(c);
    };
    for (const [name, o] of [
      ['t-5 names the old leader t-1, the others t-2', stale('t-2')],
      ['t-5 names t-1, the others t-3', stale('t-3')],
    ] as const) {
      const d = decide(o);
      assert.equal(d.membershipAction, undefined, name);
      const wait = waitOf(d, 'LeaderUnknown');
      assert.equal(wait.machine, 't-1', name);
      assert.match(wait.message, /^not removing t-1 until the voters agree on a leader \(.*t-5 names t-1/, name);
    }
    // Once t-5 agrees, leadership moves off t-2 first, and only then t-1 leaves.
    const agreed = stale('t-2');
    if (agreed.members.ok) agreed.members.list[4] = voter('t-5', { leader: memberIdOf('t-2') });
    assert.equal(decide(agreed).membershipAction?.kind, 'RemoveMember', 't-1 does not lead: it goes first');
    assert.equal(waitCodes(decide(agreed)).includes('LeaderUnknown'), false);

    // A voter naming no leader (mid-election, or cut off) contradicts nobody: the rest still agree.
    const c = healthyCluster(5);
    c.machines[3] = machine('t-4', { phase: 'Voter', deleteRequested: true });
    c.members[4] = voter('t-5', { leader: '0', errors: ['etcdserver: no leader'] });
    assert.equal(decide(observed(c), spec({ replicas: 4 })).membershipAction?.kind, 'RemoveMember');
    // A learner has no vote and never leads: it leaves whatever the voters say.
    const l = healthyCluster(3);
    l.members[2] = voter('t-3', { leader: memberIdOf('t-2') });
    const withLearner = observed({ machines: [...l.machines, machine('t-4', { phase: 'Learner', failed: true })], members: [...l.members, learner('t-4')] });
    assert.equal(decide(withLearner).membershipAction?.kind, 'RemoveMember');
  });

  test('does not remove a voter when the projected quorum would break', () => {
    const c = healthyCluster(3);
    c.machines[1] = machine('t-2', { phase: 'Voter', deleteRequested: true });
    c.members[2] = voter('t-3', { statusError: 'context deadline exceeded' });
    const d = decide(observed(c));
    assert.notEqual(d.membershipAction?.kind, 'RemoveMember');
    assert.deepEqual(waitOf(d, 'QuorumWouldBreak').message, 'removing t-2 would leave 1 healthy of 2 voters (quorum 2)');
    assert.deepEqual(machinesOf(d, 'DeleteMachine'), []);

    // With every voter healthy the same removal goes ahead.
    const ok = healthyCluster(3);
    ok.machines[1] = machine('t-2', { phase: 'Voter', deleteRequested: true });
    assert.equal(decide(observed(ok)).membershipAction?.kind, 'RemoveMember');
  });

  test('never removes the last voter', () => {
    const cases: { name: string; o: Observed; s: PlannerSpec }[] = [
      {
        name: 'the only voter is picked for deletion',
        o: observed({ machines: [machine('t-1', { phase: 'Voter', deleteRequested: true })], members: [voter('t-1')] }),
        s: spec({ replicas: 1 }),
      },
      {
        name: 'the only voter has no machine',
        o: observed({ machines: [machine('t-2')], members: [voter('t-9', { leader: memberIdOf('t-9') })], initMachine: 't-9' }),
        s: spec({ replicas: 1 }),
      },
    ];
    for (const c of cases) {
      const d = decide(c.o, c.s);
      assert.notEqual(d.membershipAction?.kind, 'RemoveMember', c.name);
      assert.notEqual(d.membershipAction?.kind, 'MoveLeader', c.name);
      assert.ok(waitCodes(d).includes('LastVoter'), `${c.name}: ${JSON.stringify(d.waits)}`);
      assert.deepEqual(machinesOf(d, 'DeleteMachine'), [], c.name);
    }
  });

  test('deletes a machine only after its member is gone (invariant 5)', () => {
    const leaving: MachineOptions = { phase: 'Voter', deleteRequested: true };
    const cases: { name: string; o: Observed; deletes: string[] }[] = [
      {
        name: 'member still listed',
        o: observed({ machines: [...healthyCluster(2).machines, machine('t-3', leaving)], members: healthyCluster(3).members }),
        deletes: [],
      },
      {
        name: 'member removed',
        o: observed({ machines: [...healthyCluster(2).machines, machine('t-3', leaving)], members: healthyCluster(2).members }),
        deletes: ['t-3'],
      },
      {
        name: 'member list unreadable, machine had joined',
        o: observed({ machines: [...healthyCluster(2).machines, machine('t-3', leaving)], members: 'context deadline exceeded' }),
        deletes: [],
      },
      {
        name: 'member list unreadable, machine never joined',
        o: observed({ machines: [...healthyCluster(3).machines, machine('t-4', { phase: 'Provisioning', deleteRequested: true })], members: 'context deadline exceeded' }),
        deletes: ['t-4'],
      },
      {
        name: 'failed machine whose member is still listed',
        o: observed({ machines: [...healthyCluster(2).machines, machine('t-3', { phase: 'Voter', failed: true })], members: healthyCluster(3).members }),
        deletes: [],
      },
    ];
    for (const c of cases) assert.deepEqual(machinesOf(decide(c.o), 'DeleteMachine'), c.deletes, c.name);
  });

  test('member removals are serialized while the machine deletions that follow run in parallel', () => {
    const c = healthyCluster(3);
    const o = observed({
      machines: [
        ...c.machines,
        machine('t-4', { phase: 'Voter', deleteRequested: true }),
        machine('t-5', { phase: 'Voter', deleteRequested: true }),
        machine('t-6', { phase: 'Voter', deleteRequested: true }),
        machine('t-7', { phase: 'Voter', deleteRequested: true }),
      ],
      members: [...c.members, voter('t-6'), voter('t-7')],
    });
    const d = decide(o);
    assert.deepEqual(machinesOf(d, 'DeleteMachine').sort(), ['t-4', 't-5']);
    assert.deepEqual(d.membershipAction, { kind: 'RemoveMember', memberId: memberIdOf('t-6'), peerURL: 'http://127.77.1.6:2380', machine: 't-6', reason: 'ScaleDown' });
  });
});

// ---------------------------------------------------------------- rollout

describe('planner: rollout', () => {
  test('rollout with maxSurge 1 creates one surge machine and removes an outdated one only after an up-to-date voter is ready', () => {
    const s = spec({ version: NEW });
    const old = healthyCluster(3);

    const start = decide(observed(old), s);
    assert.deepEqual(start.machineActions, [{ kind: 'CreateMachine', machine: 't-4', ordinal: 4, version: NEW, reason: 'RollingOut' }]);
    assert.equal(start.membershipAction, undefined);
    assert.equal(conditionOf(start, 'RollingOut').status, 'True');
    assert.equal(conditionOf(start, 'UpToDate').status, 'False');

    const provisioned = decide(observed({ machines: [...old.machines, machine('t-4', { version: NEW })], members: old.members }), s);
    assert.deepEqual(provisioned.machineActions, []);
    assert.deepEqual(provisioned.membershipAction, { kind: 'AddLearner', machine: 't-4', reason: 'JoinNextMachine' });

    const learning = decide(
      observed({ machines: [...old.machines, machine('t-4', { phase: 'Learner', version: NEW })], members: [...old.members, learner('t-4', { version: NEW })] }),
      s,
    );
    assert.deepEqual(learning.machineActions, [], 'a learner is not a ready voter: nothing outdated goes yet');
    assert.equal(learning.membershipAction?.kind, 'PromoteLearner');

    const promoted = decide(
      observed({ machines: [...old.machines, machine('t-4', { phase: 'Voter', version: NEW })], members: [...old.members, voter('t-4', { version: NEW })] }),
      s,
    );
    assert.deepEqual(machinesOf(promoted, 'RequestMachineDeletion'), ['t-1']);
    assert.deepEqual(machinesOf(promoted, 'CreateMachine'), ['t-5']);
    // t-1 leads: leadership moves to the up-to-date voter, not to an outdated one.
    assert.deepEqual(promoted.membershipAction, {
      kind: 'MoveLeader',
      fromMemberId: memberIdOf('t-1'),
      toMemberId: memberIdOf('t-4'),
      machine: 't-4',
      reason: 'BeforeRollingOut',
    });
  });

  test('rollout with maxSurge 0 removes first only from a fully healthy cluster', () => {
    const s = spec({ version: NEW, maxSurge: 0 });
    const healthy = decide(healthyObserved(3, { leader: 't-3' }), s);
    assert.deepEqual(machinesOf(healthy, 'RequestMachineDeletion'), ['t-1']);
    assert.deepEqual(machinesOf(healthy, 'CreateMachine'), ['t-4'], 'the replacement provisions in parallel');
    assert.equal(healthy.membershipAction?.kind, 'RemoveMember');
    assert.equal(healthy.membershipAction.machine, 't-1');

    const c = healthyCluster(3, { leader: 't-3' });
    c.members[1] = voter('t-2', { statusError: 'context deadline exceeded' });
    const degraded = decide(observed(c), s);
    assert.deepEqual(degraded.machineActions, []);
    assert.equal(degraded.membershipAction, undefined);

    // Once the removed machine's replacement is still provisioning, no second outdated machine goes.
    const mid = healthyCluster(3, { leader: 't-3' });
    const midObserved = observed({ machines: [mid.machines[1]!, mid.machines[2]!, machine('t-4', { phase: 'Provisioning', version: NEW })], members: [mid.members[1]!, mid.members[2]!] });
    const during = decide(midObserved, s);
    assert.deepEqual(machinesOf(during, 'RequestMachineDeletion'), []);
    assert.deepEqual(machinesOf(during, 'CreateMachine'), []);
  });
});

// ---------------------------------------------------------------- remediation

describe('planner: remediation', () => {
  function withSickT3(opts: { unhealthySince: number }): Observed {
    const c = healthyCluster(3);
    c.machines[2] = machine('t-3', { phase: 'Voter', unhealthySince: opts.unhealthySince });
    c.members[2] = voter('t-3', { statusError: 'context deadline exceeded' });
    return observed(c);
  }

  test('remediation: unhealthy voter past unhealthyAfter is marked failed, removed and replaced', () => {
    const d = decide(withSickT3({ unhealthySince: NOW - 10_000 }));
    assert.deepEqual(machinesOf(d, 'MarkMachineFailed'), ['t-3']);
    const mark = d.machineActions.find((a) => a.kind === 'MarkMachineFailed');
    assert.equal(mark?.reason, 'MemberUnhealthy');
    assert.deepEqual(machinesOf(d, 'CreateMachine'), ['t-4']);
    assert.deepEqual(d.membershipAction, { kind: 'RemoveMember', memberId: memberIdOf('t-3'), peerURL: 'http://127.77.1.3:2380', machine: 't-3', reason: 'Remediation' });
    assert.equal(conditionOf(d, 'Remediating').status, 'True');

    // Next pass: the member is gone, the failed machine is torn down.
    const c = healthyCluster(2);
    const next = decide(observed({ machines: [...c.machines, machine('t-3', { phase: 'Voter', failed: true }), machine('t-4', { phase: 'Provisioning' })], members: c.members }));
    assert.deepEqual(next.machineActions, [{ kind: 'DeleteMachine', machine: 't-3', reason: 'Remediation' }]);

    // Not yet unhealthy long enough.
    const early = decide(withSickT3({ unhealthySince: NOW - 9_999 }));
    assert.deepEqual(machinesOf(early, 'MarkMachineFailed'), []);
    assert.equal(early.membershipAction, undefined);
  });

  test('remediation respects retryPeriod and maxRetry', () => {
    const cases: {
      name: string;
      last: NonNullable<Observed['lastRemediation']>;
      s: PlannerSpec;
      marks: boolean;
      wait?: string;
      blocked?: boolean;
    }[] = [
      {
        name: 'within retryPeriod',
        last: { machine: 't-2', at: NOW - 1000, retryCount: 0 },
        s: spec({ remediation: { retryPeriodMs: 5000 } }),
        marks: false,
        wait: 'RemediationDeferred',
      },
      { name: 'retryPeriod elapsed', last: { machine: 't-2', at: NOW - 5000, retryCount: 0 }, s: spec({ remediation: { retryPeriodMs: 5000 } }), marks: true },
      {
        name: 'maxRetry reached within minHealthyPeriod',
        last: { machine: 't-2', at: NOW - 1000, retryCount: 1 },
        s: spec({ remediation: { maxRetry: 1 } }),
        marks: false,
        wait: 'CannotBeRemediated',
        blocked: true,
      },
      { name: 'below maxRetry', last: { machine: 't-2', at: NOW - 1000, retryCount: 0 }, s: spec({ remediation: { maxRetry: 1 } }), marks: true },
      {
        name: 'last remediation older than minHealthyPeriod resets the count',
        last: { machine: 't-2', at: NOW - 3_600_000, retryCount: 5 },
        s: spec({ remediation: { maxRetry: 1, retryPeriodMs: 5000 } }),
        marks: true,
      },
    ];
    for (const c of cases) {
      const o = { ...withSickT3({ unhealthySince: NOW - 60_000 }), lastRemediation: c.last };
      const d = decide(o, c.s);
      assert.deepEqual(machinesOf(d, 'MarkMachineFailed'), c.marks ? ['t-3'] : [], c.name);
      if (c.wait !== undefined) assert.equal(waitOf(d, c.wait).machine, 't-3', c.name);
      assert.equal(d.blocked?.code, c.blocked === true ? 'CannotBeRemediated' : undefined, c.name);
      if (!c.marks) assert.equal(d.membershipAction, undefined, c.name);
    }
  });

  test('a machine whose provisioning failed is replaced like other remediation: retryPeriod, then maxRetry ends in CannotBeRemediated with the provider error', () => {
    const withFailed = (last?: NonNullable<Observed['lastRemediation']>): Observed => {
      const c = healthyCluster(2);
      return observed({
        machines: [...c.machines, machine('t-3', { phase: 'Provisioning', infra: 'Failed', failureMessage: 'quota exceeded' })],
        members: c.members,
        ...(last ? { lastRemediation: last } : {}),
      });
    };
    const s = spec({ remediation: { retryPeriodMs: 60_000, maxRetry: 2 } });

    // The first failure of a sequence is replaced at once.
    const first = decide(withFailed(), s);
    assert.deepEqual(
      first.machineActions.filter((a) => a.kind === 'MarkMachineFailed'),
      [{ kind: 'MarkMachineFailed', machine: 't-3', reason: 'ProvisioningFailed', message: 'quota exceeded' }],
    );
    assert.deepEqual(machinesOf(first, 'DeleteMachine'), ['t-3'], 'it never joined: delete at once');
    assert.deepEqual(machinesOf(first, 'CreateMachine'), ['t-4']);
    assert.equal(first.blocked, undefined);

    // A retry waits retryPeriod after the last remediation.
    const deferred = decide(withFailed({ machine: 't-2', at: NOW - 1000, retryCount: 0 }), s);
    assert.deepEqual(machinesOf(deferred, 'MarkMachineFailed'), []);
    assert.deepEqual(machinesOf(deferred, 'CreateMachine'), [], 'no replacement before the failed machine is given up');
    assert.match(waitOf(deferred, 'RemediationDeferred').message, /t-3: ProvisioningFailed: quota exceeded$/);
    assert.equal(deferred.blocked, undefined);

    // maxRetry retries in the sequence: blocked, and the condition says what the provider said.
    const exhausted = decide(withFailed({ machine: 't-2', at: NOW - 61_000, retryCount: 2 }), s);
    assert.deepEqual(machinesOf(exhausted, 'MarkMachineFailed'), []);
    assert.deepEqual(machinesOf(exhausted, 'CreateMachine'), []);
    assert.equal(exhausted.blocked?.code, 'CannotBeRemediated');
    assert.equal(exhausted.blocked.machine, 't-3');
    assert.match(exhausted.blocked.message, /maxRetry 2.*quota exceeded/);
    const remediating = conditionOf(exhausted, 'Remediating');
    assert.deepEqual([remediating.status, remediating.reason], ['False', 'CannotBeRemediated']);
    assert.match(remediating.message, /quota exceeded/);
  });

  test('a machine the provider lost is marked failed (MachineMissing) and its member removed', () => {
    const c = healthyCluster(3);
    c.machines[2] = machine('t-3', { phase: 'Voter', infra: 'none' });
    c.members[2] = voter('t-3', { statusError: 'connection refused' });
    const d = decide(observed(c));
    const mark = d.machineActions.find((a) => a.kind === 'MarkMachineFailed');
    assert.equal(mark?.machine, 't-3');
    assert.equal(mark.reason, 'MachineMissing');
    assert.equal(d.membershipAction?.kind, 'RemoveMember');
    assert.deepEqual(machinesOf(d, 'DeleteMachine'), []);
  });

  test('several failed voters leave one membership change at a time, never breaking quorum', () => {
    const c = healthyCluster(5);
    for (const i of [3, 4]) {
      const name = `t-${String(i + 1)}`;
      c.machines[i] = machine(name, { phase: 'Voter', unhealthySince: NOW - 60_000 });
      c.members[i] = voter(name, { statusError: 'connection refused' });
    }
    const d = decide(observed(c), spec({ replicas: 5 }));
    assert.deepEqual(machinesOf(d, 'MarkMachineFailed'), ['t-4', 't-5']);
    assert.deepEqual(machinesOf(d, 'CreateMachine'), ['t-6', 't-7']);
    assert.equal(d.membershipAction?.kind, 'RemoveMember');
    assert.equal(d.membershipAction.machine, 't-4');
  });

  test('no member runs and the list is unreadable (host reboot): every voter restarts from its data dir at once, none is bootstrapped', () => {
    const stopped = (name: string, startedAt?: number) => machine(name, { phase: 'Voter', memberRunning: false, ...(startedAt === undefined ? {} : { memberStartedAt: startedAt }) });
    const waiting = machine('t-4', { provisionedAt: NOW - 1000 });
    const rebooted = (...machines: Observed['machines']) => observed({ machines: [...machines, waiting], members: 'connection refused', initMachine: 't-1' });
    const first = decide(rebooted(stopped('t-1'), stopped('t-2'), stopped('t-3')), spec({ replicas: 4 }));
    assert.deepEqual(
      first.machineActions,
      ['t-1', 't-2', 't-3'].map((machine) => ({ kind: 'RestartMember', machine, reason: 'MemberListUnavailable' })),
      'the voters, the init machine among them; t-4 never was a member and waits',
    );
    assert.equal(first.membershipAction, undefined, 'a restart is no membership change, and nothing is bootstrapped');

    // t-1 and t-2 exited right after their starts: wait out the backoff, naming each, instead of a tight loop.
    const backoff = decide(rebooted(stopped('t-1', NOW - 300), stopped('t-2', NOW - 2000), stopped('t-3', NOW - 100)), spec({ replicas: 4 }));
    assert.deepEqual(machinesOf(backoff, 'RestartMember'), ['t-2']);
    assert.deepEqual(
      backoff.waits.filter((w) => w.code === 'MemberRestarting').map((w) => w.machine),
      ['t-1', 't-3'],
    );
    assert.ok(waitCodes(backoff).includes('MemberListUnavailable'));
  });

  test('quorum lost to stopped voters: Blocked with QuorumLost, and the stopped voters start again from their data dirs', () => {
    const c = healthyCluster(3);
    for (const i of [1, 2]) {
      const name = `t-${String(i + 1)}`;
      c.machines[i] = machine(name, { phase: 'Voter', memberRunning: false, unhealthySince: NOW - 60_000 });
      c.members[i] = voter(name, { statusError: 'connection refused' });
    }
    const d = decide(observed(c));
    assert.equal(d.blocked?.code, 'QuorumLost');
    assert.deepEqual(machinesOf(d, 'RestartMember'), ['t-2', 't-3']);
    assert.equal(d.membershipAction, undefined);
    assert.deepEqual(machinesOf(d, 'MarkMachineFailed'), [], 'no remediation without quorum');

    // A stopped machine whose member etcd no longer lists is not started: it would only learn it was removed.
    const onlyOrphans = decide(observed({ ...c, members: [c.members[0]!, voter('t-8', { statusError: 'x' }), voter('t-9', { statusError: 'x' })] }));
    assert.equal(onlyOrphans.blocked?.code, 'QuorumLost');
    assert.deepEqual(machinesOf(onlyOrphans, 'RestartMember'), []);

    // With quorum a stopped voter is not restarted here: remediation replaces it after unhealthyAfter.
    const one = healthyCluster(3);
    one.machines[2] = machine('t-3', { phase: 'Voter', memberRunning: false, unhealthySince: NOW - 1000 });
    one.members[2] = voter('t-3', { statusError: 'connection refused' });
    assert.deepEqual(machinesOf(decide(observed(one)), 'RestartMember'), []);
  });

  test('blocked with QuorumLost when healthy voters < quorum', () => {
    const c = healthyCluster(3);
    for (const i of [1, 2]) {
      const name = `t-${String(i + 1)}`;
      c.machines[i] = machine(name, { phase: 'Voter', unhealthySince: NOW - 60_000 });
      c.members[i] = voter(name, { statusError: 'context deadline exceeded' });
    }
    const d = decide(observed(c));
    assert.deepEqual(d.blocked, { code: 'QuorumLost', message: 'only 1 of 3 voters are healthy (quorum 2); membership cannot change' });
    assert.equal(d.membershipAction, undefined);
    assert.deepEqual(machinesOf(d, 'MarkMachineFailed'), [], 'no remediation without quorum');
    assert.equal(d.converged, false);
    assert.equal(conditionOf(d, 'Available').status, 'False');
    assert.equal(conditionOf(d, 'Available').reason, 'QuorumUnavailable');
  });

  test('voters that answer but name no leader (an election) hold membership changes, and the message says why', () => {
    const c = healthyCluster(3);
    for (const i of [0, 1, 2]) c.members[i] = voter(`t-${String(i + 1)}`, { leader: '0' });
    const d = decide(observed(c));
    assert.deepEqual(d.blocked, {
      code: 'QuorumLost',
      message: 'only 0 of 3 voters are healthy (quorum 2); 3 answer but name no leader (an election, or peers that cannot reach each other); membership cannot change',
    });
    assert.equal(d.membershipAction, undefined);
    assert.deepEqual(machinesOf(d, 'RestartMember'), [], 'every member runs: nothing to start');
  });
});

// ---------------------------------------------------------------- gate, reporting

describe('planner: gate and reporting', () => {
  test('at most one membership action per decision, chosen by the priority ladder', () => {
    const c3 = healthyCluster(3);
    // On 3.6, started with --max-learners 2: room for a second learner.
    const c36 = healthyCluster(3, { version: '3.6.17', maxLearners: 2 });
    const orphan = learner('t-9', { id: '9000000000000000009', peerURL: 'http://127.77.1.9:2380' });
    const cases: { name: string; o: Observed; s: PlannerSpec; expect: { kind: string; machine?: string } }[] = [
      {
        name: 'repair beats remediation and scale up',
        o: observed({
          machines: [c3.machines[0]!, c3.machines[1]!, machine('t-3', { phase: 'Voter', failed: true }), machine('t-4')],
          members: [...c3.members, orphan],
        }),
        s: spec(),
        expect: { kind: 'RemoveMember' },
      },
      {
        name: 'remediation beats scale down',
        o: observed({
          machines: [c3.machines[0]!, machine('t-2', { phase: 'Voter', deleteRequested: true }), machine('t-3', { phase: 'Voter', failed: true }), ...healthyCluster(2, { from: 4 }).machines],
          members: [...c3.members, voter('t-4'), voter('t-5')],
        }),
        s: spec({ replicas: 3 }),
        expect: { kind: 'RemoveMember', machine: 't-3' },
      },
      {
        name: 'a departure beats a join',
        o: observed({ machines: [c3.machines[0]!, c3.machines[1]!, machine('t-3', { phase: 'Voter', deleteRequested: true }), machine('t-4')], members: c3.members }),
        s: spec(),
        expect: { kind: 'RemoveMember', machine: 't-3' },
      },
      {
        name: 'a join beats a promotion',
        o: observed({ machines: [...c36.machines, machine('t-4', { phase: 'Learner', version: '3.6.17', maxLearners: 2 }), machine('t-5', { version: '3.6.17' })], members: [...c36.members, learner('t-4', { version: '3.6.17' })] }),
        s: spec({ replicas: 5, version: '3.6.17', maxLearners: 2 }),
        expect: { kind: 'AddLearner', machine: 't-5' },
      },
      {
        name: 'two provisioned machines and a free slot: one AddLearner',
        o: observed({ machines: [...c3.machines, machine('t-4', { provisionedAt: NOW - 2000 }), machine('t-5', { provisionedAt: NOW - 1000 })], members: c3.members }),
        s: spec({ replicas: 5, maxLearners: 2 }),
        expect: { kind: 'AddLearner', machine: 't-4' },
      },
    ];
    for (const c of cases) {
      const d = decide(c.o, c.s);
      assert.equal(d.membershipAction?.kind, c.expect.kind, c.name);
      if (c.expect.machine !== undefined) assert.equal(d.membershipAction.machine, c.expect.machine, c.name);
      assertNoMembershipInMachineActions(d);
    }
    const repaired = decide(cases[0]!.o, cases[0]!.s).membershipAction;
    assert.equal(repaired?.kind === 'RemoveMember' ? repaired.memberId : '', '9000000000000000009');
  });

  test('explains an etcd refusal (UnhealthyCluster) from the last attempt', () => {
    const c = healthyCluster(3);
    const joining = observed({
      machines: [...c.machines, machine('t-4')],
      members: c.members,
      lastMembershipAttempt: { action: 'AddLearner', target: 't-4', at: NOW - 300, errorKind: 'UnhealthyCluster', error: 'etcdserver: unhealthy cluster' },
    });
    const d = decide(joining, spec({ replicas: 5 }));
    assert.equal(d.membershipAction?.kind, 'AddLearner');
    const wait = waitOf(d, 'RetryUnhealthyCluster');
    assert.match(wait.message, /5 s/);
    assert.match(wait.message, /retrying/);

    const promoting = observed({
      machines: [...healthyCluster(2).machines, machine('t-3', { phase: 'Learner' })],
      members: [...healthyCluster(2).members, learner('t-3')],
      lastMembershipAttempt: { action: 'PromoteLearner', target: 't-3', at: NOW - 300, errorKind: 'NotInSync' },
    });
    assert.equal(waitOf(decide(promoting), 'RetryNotInSync').message, 'etcd says the learner is not in sync with the leader yet; retrying');

    // A refusal of another kind of action says nothing about this one.
    const other = { ...joining, lastMembershipAttempt: { action: 'PromoteLearner' as const, target: 't-9', at: NOW - 300, errorKind: 'NotInSync' as const } };
    assert.ok(!waitCodes(decide(other, spec({ replicas: 5 }))).some((code) => code.startsWith('Retry')));
  });

  test('converged only when voters == replicas, no learners, all healthy', () => {
    const sick = healthyCluster(3);
    sick.members[2] = voter('t-3', { errors: ['etcdserver: no leader'] });
    const withLearner = healthyCluster(2);
    const cases: { name: string; o: Observed; s: PlannerSpec; converged: boolean }[] = [
      { name: '3 healthy voters, 3 wanted', o: healthyObserved(3), s: spec(), converged: true },
      { name: '5 healthy voters, 5 wanted', o: healthyObserved(5), s: spec({ replicas: 5 }), converged: true },
      { name: '3 voters, 5 wanted', o: healthyObserved(3), s: spec({ replicas: 5 }), converged: false },
      {
        name: 'a learner still to promote',
        o: observed({ machines: [...withLearner.machines, machine('t-3', { phase: 'Learner' })], members: [...withLearner.members, learner('t-3')] }),
        s: spec(),
        converged: false,
      },
      { name: 'a voter reports errors', o: observed(sick), s: spec(), converged: false },
      { name: 'an alarm is raised', o: observed({ ...healthyCluster(3), alarms: [{ memberId: memberIdOf('t-1'), alarm: 'NOSPACE' }] }), s: spec(), converged: false },
      { name: 'outdated machines', o: healthyObserved(3), s: spec({ version: NEW }), converged: false },
      { name: 'member list unreadable', o: observed({ machines: healthyCluster(3).machines, members: 'context deadline exceeded' }), s: spec(), converged: false },
      {
        name: 'a leaving machine still to delete',
        o: observed({ machines: [...healthyCluster(3).machines, machine('t-4', { phase: 'Voter', deleteRequested: true })], members: healthyCluster(3).members }),
        s: spec(),
        converged: false,
      },
    ];
    for (const c of cases) {
      const d = decide(c.o, c.s);
      assert.equal(d.converged, c.converged, c.name);
      if (c.converged) {
        assert.deepEqual(d.machineActions, [], c.name);
        assert.equal(d.membershipAction, undefined, c.name);
        assert.deepEqual(d.waits, [], c.name);
        assert.equal(d.requeueAfterMs, REQUEUE.idle, c.name);
      }
    }
  });

  test('conditions: ScalingUp true with the blocking reason', () => {
    const c = healthyCluster(2);
    const o = observed({ machines: [...c.machines, machine('t-3', { phase: 'Learner' })], members: [...c.members, learner('t-3', { raftAppliedIndex: 1200 })] });
    const d = decide(o);
    assert.deepEqual(conditionOf(d, 'ScalingUp'), {
      type: 'ScalingUp',
      status: 'True',
      reason: 'ScalingUp',
      message: 'ScalingUp is waiting: waiting for learner t-3 to catch up (applied 1200/1350)',
    });
    assert.equal(conditionOf(d, 'Available').status, 'True');
    assert.equal(conditionOf(d, 'EtcdClusterHealthy').message, '2/2 voters healthy, 1 learners');
    assert.equal(conditionOf(d, 'MachinesReady').message, '2/3 machines are healthy voters');

    const done = decide(healthyObserved(3));
    assert.deepEqual(conditionOf(done, 'ScalingUp'), { type: 'ScalingUp', status: 'False', reason: 'NotScalingUp', message: '' });
    assert.equal(conditionOf(done, 'MachinesReady').status, 'True');
    assert.equal(conditionOf(done, 'EtcdClusterHealthy').status, 'True');
  });

  test('conditions: MachinesReady reason agrees with its status', () => {
    const table: { name: string; o: Observed; s: PlannerSpec }[] = [
      { name: 'converged', o: healthyObserved(3), s: spec() },
      { name: '3 ready voters and a surge machine provisioning', o: observed({ ...healthyCluster(3), machines: [...healthyCluster(3).machines, machine('t-4', { phase: 'Provisioning', version: NEW })] }), s: spec({ version: NEW }) },
      { name: '2 of 3 ready', o: observed({ machines: [...healthyCluster(2).machines, machine('t-3')], members: healthyCluster(2).members }), s: spec() },
    ];
    for (const c of table) {
      const ready = conditionOf(decide(c.o, c.s), 'MachinesReady');
      assert.equal(ready.reason, ready.status === 'True' ? 'Ready' : 'NotReady', `${c.name}: ${JSON.stringify(ready)}`);
    }
  });

  test('deterministic: same input gives a deep-equal decision', () => {
    const c = healthyCluster(3, { failureDomains: ['a', 'b'] });
    c.machines[2] = machine('t-3', { phase: 'Voter', unhealthySince: NOW - 60_000, failureDomain: 'a' });
    c.members[2] = voter('t-3', { statusError: 'x' });
    const o = observed({ machines: [...c.machines, machine('t-4', { phase: 'Provisioning', failureDomain: 'b' })], members: c.members });
    const s = spec({ replicas: 5, failureDomains: ['a', 'b'] });
    const before = structuredClone(o);
    const first = plan(s, o, NOW);
    const second = plan(structuredClone(s), structuredClone(o), NOW);
    assert.deepEqual(second, first);
    assert.deepEqual(o, before, 'plan() does not mutate its input');
    assert.ok(first.machineActions.length > 0, 'the case exercises real actions');
  });

  test('waits for the member list when it cannot be read', () => {
    const d = decide(observed({ machines: healthyCluster(3).machines, members: 'context deadline exceeded' }));
    assert.equal(d.membershipAction, undefined);
    assert.equal(waitOf(d, 'MemberListUnavailable').message, 'cannot read the etcd member list: context deadline exceeded');
    assert.deepEqual(machinesOf(d, 'MarkMachineFailed'), [], 'no failure is inferred from a failed read');
    assert.deepEqual(d.phases, { 't-1': 'Voter', 't-2': 'Voter', 't-3': 'Voter' }, 'phases stay as last known');
  });

  test('resumes a create whose provider call never happened', () => {
    const o = observed({ machines: [machine('t-1', { phase: 'Provisioning' }), machine('t-2', { phase: 'Pending', failureDomain: 'b' })], nextOrdinal: 3 });
    const d = decide(o);
    assert.deepEqual(d.machineActions, [
      { kind: 'CreateMachine', machine: 't-2', ordinal: 2, version: spec().version, reason: 'ResumeCreate', failureDomain: 'b' },
      { kind: 'CreateMachine', machine: 't-3', ordinal: 3, version: spec().version, reason: 'ScaleUp' },
    ]);
  });

  test("reports each machine's phase as observed", () => {
    const c = healthyCluster(2);
    const o = observed({
      machines: [
        ...c.machines,
        machine('t-3', { phase: 'Learner' }),
        machine('t-4', { phase: 'Joining', memberRunning: false, memberStartedAt: null }),
        machine('t-5'),
        machine('t-6', { phase: 'Provisioning' }),
        machine('t-7', { phase: 'Provisioning', infra: 'Failed' }),
        machine('t-8', { phase: 'Voter', deleteRequested: true, memberRunning: false }),
      ],
      members: [...c.members, learner('t-3'), learner('t-4', { unstarted: true })],
    });
    const d = decide(o, spec({ replicas: 7, maxLearners: 2 }));
    assert.deepEqual(d.phases, {
      't-1': 'Voter',
      't-2': 'Voter',
      't-3': 'Learner',
      't-4': 'Joining',
      't-5': 'Provisioned',
      't-6': 'Provisioning',
      't-7': 'Failed',
      't-8': 'Deleting',
    });
  });

  test('requeues fast while a learner catches up, slowly while machines provision, idle when converged', () => {
    const c = healthyCluster(2);
    const catchingUp = observed({ machines: [...c.machines, machine('t-3', { phase: 'Learner' })], members: [...c.members, learner('t-3', { raftAppliedIndex: 10 })] });
    assert.equal(decide(catchingUp).requeueAfterMs, REQUEUE.fast);
    const provisioning = observed({ machines: ['t-1', 't-2', 't-3'].map((n) => machine(n, { phase: 'Provisioning' })) });
    assert.equal(decide(provisioning).requeueAfterMs, REQUEUE.slow);
    assert.equal(decide(healthyObserved(3)).requeueAfterMs, REQUEUE.idle);
    assert.equal(decide(observed()).requeueAfterMs, REQUEUE.now);
  });
});

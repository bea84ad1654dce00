import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { REQUEUE } from '../../src/planner/requeue.ts';
import type { Observed, ObservedMember, PlannerSpec } from '../../src/planner/types.ts';
import { decide, machinesOf, waitCodes, waitOf } from '../support/decision.ts';
import { healthyCluster, healthyObserved, learner, machine, memberIdOf, NOW, observed, spec, voter } from '../support/observed.ts';

// Scale up (src/planner/scale-up.ts, creation.ts, init-retry.ts, preflight.ts): machines are created in parallel, the cluster is initialized once, learners join one membership change at a time.

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

  test('during a bring-up, a learner added under 5 s ago is promoted after the add that only waits for another learner to start', () => {
    const v = '3.6.17';
    const o = (opts: { voters?: number; addedAgoMs?: number; bootingAgoMs?: number; candidate?: boolean; maxLearners?: number } = {}) => {
      const maxLearners = opts.maxLearners ?? 8;
      const c = healthyCluster(opts.voters ?? 1, { version: v, maxLearners });
      const joined = machine('t-4', { phase: 'Learner', version: v, maxLearners });
      joined.record.phaseTimes.Learner = NOW - (opts.addedAgoMs ?? 1_000);
      const booting = machine('t-5', { phase: 'Joining', version: v, maxLearners });
      booting.record.phaseTimes.Learner = NOW - (opts.bootingAgoMs ?? 500);
      return observed({
        machines: [...c.machines, joined, booting, ...(opts.candidate === false ? [] : [machine('t-6', { version: v })])],
        members: [...c.members, learner('t-4', { version: v }), { ...learner('t-5', { statusError: 'connection refused', version: v }), name: '', clientURLs: [] }],
      });
    };
    const s = (check: 'etcd' | 'fastplane' = 'etcd') => spec({ replicas: 6, version: v, maxLearners: 8, reconfigurationCheck: check });
    const deferred = decide(o(), s());
    assert.equal(deferred.membershipAction, undefined);
    assert.match(waitOf(deferred, 'PromotionAfterPendingAdd').message, /promoting t-4 after the next add/);
    assert.equal(waitOf(deferred, 'PromotionAfterPendingAdd').machine, 't-4');
    const promoted = { kind: 'PromoteLearner', machine: 't-4', memberId: memberIdOf('t-4'), reason: 'LearnerCaughtUp' };
    const cases: [string, Observed, PlannerSpec][] = [
      ['its peer connection is 5 s old: etcd counts it', o({ addedAgoMs: 5_000 }), s()],
      ['the booting learner has not started within 10 s: not waited for', o({ bootingAgoMs: 10_000 }), s()],
      ['two voters already: a promotion changes nothing for the add rule here', o({ voters: 2 }), s()],
      ["etcd's check off: fastplane's guard decides", o(), s('fastplane')],
      ['no machine waits to join', o({ candidate: false }), s()],
      ['the learner slots are taken: the add waits for a promotion', o({ maxLearners: 2 }), spec({ replicas: 6, version: v, maxLearners: 2 })],
    ];
    for (const [name, observation, planned] of cases) assert.deepEqual(decide(observation, planned).membershipAction, promoted, name);
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

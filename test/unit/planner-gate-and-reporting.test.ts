import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { plan } from '../../src/planner/plan.ts';
import { REQUEUE } from '../../src/planner/requeue.ts';
import type { Observed, PlannerSpec } from '../../src/planner/types.ts';
import { assertNoMembershipInMachineActions, conditionOf, decide, machinesOf, ROLLOUT_VERSION, waitCodes, waitOf } from '../support/decision.ts';
import { healthyCluster, healthyObserved, learner, machine, memberIdOf, NOW, observed, spec, voter } from '../support/observed.ts';

// The ladder and what a decision reports (src/planner/plan.ts, conditions.ts, view.ts, requeue.ts): one membership action per decision, waits, conditions, convergence and requeue times.

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
      { name: 'outdated machines', o: healthyObserved(3), s: spec({ version: ROLLOUT_VERSION }), converged: false },
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
      { name: '3 ready voters and a surge machine provisioning', o: observed({ ...healthyCluster(3), machines: [...healthyCluster(3).machines, machine('t-4', { phase: 'Provisioning', version: ROLLOUT_VERSION })] }), s: spec({ version: ROLLOUT_VERSION }) },
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

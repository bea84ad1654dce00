import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Observed, PlannerSpec } from '../../src/planner/types.ts';
import { conditionOf, decide, machinesOf, ROLLOUT_VERSION, waitCodes, waitOf } from '../support/decision.ts';
import { healthyCluster, healthyObserved, learner, machine, memberIdOf, observed, spec, voter, type MachineOptions } from '../support/observed.ts';

// Scale down and rollout (src/planner/scale-down.ts, removal.ts): leadership moves first, removals keep the projected quorum, machines go only after their members.

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
    const s = spec({ version: ROLLOUT_VERSION });
    const old = healthyCluster(3);

    const start = decide(observed(old), s);
    assert.deepEqual(start.machineActions, [{ kind: 'CreateMachine', machine: 't-4', ordinal: 4, version: ROLLOUT_VERSION, reason: 'RollingOut' }]);
    assert.equal(start.membershipAction, undefined);
    assert.equal(conditionOf(start, 'RollingOut').status, 'True');
    assert.equal(conditionOf(start, 'UpToDate').status, 'False');

    const provisioned = decide(observed({ machines: [...old.machines, machine('t-4', { version: ROLLOUT_VERSION })], members: old.members }), s);
    assert.deepEqual(provisioned.machineActions, []);
    assert.deepEqual(provisioned.membershipAction, { kind: 'AddLearner', machine: 't-4', reason: 'JoinNextMachine' });

    const learning = decide(
      observed({ machines: [...old.machines, machine('t-4', { phase: 'Learner', version: ROLLOUT_VERSION })], members: [...old.members, learner('t-4', { version: ROLLOUT_VERSION })] }),
      s,
    );
    assert.deepEqual(learning.machineActions, [], 'a learner is not a ready voter: nothing outdated goes yet');
    assert.equal(learning.membershipAction?.kind, 'PromoteLearner');

    const promoted = decide(
      observed({ machines: [...old.machines, machine('t-4', { phase: 'Voter', version: ROLLOUT_VERSION })], members: [...old.members, voter('t-4', { version: ROLLOUT_VERSION })] }),
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
    const s = spec({ version: ROLLOUT_VERSION, maxSurge: 0 });
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
    const midObserved = observed({ machines: [mid.machines[1]!, mid.machines[2]!, machine('t-4', { phase: 'Provisioning', version: ROLLOUT_VERSION })], members: [mid.members[1]!, mid.members[2]!] });
    const during = decide(midObserved, s);
    assert.deepEqual(machinesOf(during, 'RequestMachineDeletion'), []);
    assert.deepEqual(machinesOf(during, 'CreateMachine'), []);
  });

  test('no removal while an added learner has not started and named itself; one whose machine is going holds nothing', () => {
    // 3 voters and t-4 added as a learner (replicas 4). Its process boots with the membership it was
    // given: a removal before it names itself makes it exit ("member count is unequal").
    const joining = (t4: ReturnType<typeof learner>, t4Machine: MachineOptions, voters: (c: ReturnType<typeof healthyCluster>) => void): Observed => {
      const c = healthyCluster(3);
      voters(c);
      return observed({ machines: [...c.machines, machine('t-4', t4Machine)], members: [...c.members, t4] });
    };
    const unnamed = { ...learner('t-4', { statusError: 'connection refused' }), name: '', clientURLs: [] };
    const named = learner('t-4', { statusError: 'context deadline exceeded' });
    const booting: MachineOptions = { phase: 'Joining', memberRunning: true };
    const failedT2 = (c: ReturnType<typeof healthyCluster>): void => {
      c.machines[1] = machine('t-2', { phase: 'Voter', failed: true });
    };
    const leavingT2 = (c: ReturnType<typeof healthyCluster>): void => {
      c.machines[1] = machine('t-2', { phase: 'Voter', deleteRequested: true });
    };
    const orphanT2 = (c: ReturnType<typeof healthyCluster>): void => {
      c.machines.splice(1, 1);
    };
    const cases: { name: string; o: Observed; expect: string }[] = [
      { name: 'remediation of a failed voter, learner unnamed', o: joining(unnamed, booting, failedT2), expect: 'LearnerNotStarted' },
      { name: 'scale-down victim, learner unnamed', o: joining(unnamed, booting, leavingT2), expect: 'LearnerNotStarted' },
      { name: 'orphan voter (repair), learner unnamed', o: joining(unnamed, booting, orphanT2), expect: 'LearnerNotStarted' },
      { name: 'remediation of a failed voter, learner named', o: joining(named, booting, failedT2), expect: 'RemoveMember' },
      { name: 'scale-down victim, learner named', o: joining(named, booting, leavingT2), expect: 'RemoveMember' },
      { name: 'the unnamed learner itself is leaving', o: joining(unnamed, { ...booting, deleteRequested: true }, () => undefined), expect: 'RemoveMember' },
      { name: 'failed voter, the unnamed learner failed too', o: joining(unnamed, { ...booting, failed: true }, failedT2), expect: 'RemoveMember' },
    ];
    for (const c of cases) {
      const d = decide(c.o, spec({ replicas: 4 }));
      if (c.expect === 'RemoveMember') {
        assert.equal(d.membershipAction?.kind, 'RemoveMember', `${c.name}: ${JSON.stringify(d.waits)}`);
        continue;
      }
      assert.equal(d.membershipAction, undefined, c.name);
      assert.match(waitOf(d, c.expect).message, /learner t-4 has not started yet and a removal now would change the membership it boots with/, c.name);
    }
  });
});

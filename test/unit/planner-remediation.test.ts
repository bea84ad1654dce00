import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { Observed, PlannerSpec } from '../../src/planner/types.ts';
import { conditionOf, decide, machinesOf, waitCodes, waitOf } from '../support/decision.ts';
import { healthyCluster, machine, memberIdOf, NOW, observed, spec, voter } from '../support/observed.ts';

// Remediation (src/planner/remediation.ts): unhealthy, failed or lost machines are replaced within retryPeriod and maxRetry, never breaking quorum.

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

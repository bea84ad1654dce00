import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defaultControlPlane } from '../../src/api/control-plane.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import { execute } from '../../src/executor/execute.ts';
import { FencedWriter, RenewDeadlineError } from '../../src/lease/fenced-writer.ts';
import type { MembershipAction, Observed } from '../../src/planner/types.ts';
import type { Clock } from '../../src/ports/clock.ts';
import { EtcdAdminError, type EtcdAdmin, type EtcdMemberStatus } from '../../src/ports/etcd-admin.ts';
import type { InfraProvider } from '../../src/ports/machine-provider.ts';
import { clientURLOf, healthyCluster, learner, machine, memberIdOf, observed } from '../support/observed.ts';

/**
 * Every membership call, and each of its pre-checks, must end before the lease's renew deadline: with
 * a TTL of 10 s, a 1 s margin and calls of up to 3 s, a lease renewed at 0 allows calls until 9 s.
 */
const TTL_MS = 10_000;
const MARGIN_MS = 1000;
const CALL_BOUND_MS = 3000;

class FakeClock implements Clock {
  constructor(public t: number) {}
  now(): number {
    return this.t;
  }
  sleep(ms: number): Promise<void> {
    this.t += ms;
    return Promise.resolve();
  }
}

/** etcd as the executor sees it: status answers (or not) and takes `statusTakesMs` of clock time. */
class FakeEtcd implements EtcdAdmin {
  readonly calls: string[] = [];
  statusTakesMs = 10;
  silent = new Set<string>();
  /** The raft term a member's answer names, by endpoint (2 when not set). */
  terms = new Map<string, number>();
  /** The member behind each endpoint, as the member list has it. */
  private readonly ids = new Map(['t-1', 't-2', 't-3', 't-4'].map((name) => [clientURLOf(name), memberIdOf(name)]));

  constructor(private readonly clock: FakeClock) {}

  status(endpoint: string): Promise<EtcdMemberStatus> {
    this.calls.push(`status ${endpoint}`);
    this.clock.t += this.statusTakesMs;
    if (this.silent.has(endpoint)) return Promise.reject(new EtcdAdminError('Unreachable', `${endpoint}: connection refused`));
    const memberId = this.ids.get(endpoint) ?? '1';
    return Promise.resolve({ memberId, leaderId: memberIdOf('t-1'), raftIndex: 100, raftAppliedIndex: 100, raftTerm: this.terms.get(endpoint) ?? 2, isLearner: false, version: '3.5.16', dbSize: 1, errors: [] });
  }
  removeMember(_endpoints: readonly string[], memberId: string): Promise<void> {
    this.calls.push(`remove ${memberId}`);
    return Promise.resolve();
  }
  promoteLearner(_endpoints: readonly string[], memberId: string): Promise<void> {
    this.calls.push(`promote ${memberId}`);
    return Promise.resolve();
  }
  memberList(): never {
    throw new Error('not expected');
  }
  addLearner(): never {
    throw new Error('not expected');
  }
  moveLeader(): never {
    throw new Error('not expected');
  }
  alarms(): never {
    throw new Error('not expected');
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

async function run(startAt: number, o: Observed, action: MembershipAction, setUp: (etcd: FakeEtcd) => void = () => undefined) {
  const clock = new FakeClock(0);
  const store = new MemoryStateStore({ isHolderAlive: () => true });
  await store.applySpec(defaultControlPlane('t'), 0);
  const token = 'token-1';
  assert.ok(await store.acquireLease('t', { token, holder: 'test', host: 'test', pid: 1, ttlMs: TTL_MS }, 0));
  const writer = new FencedWriter(store, { cluster: 't', token }, { clock, ttlMs: TTL_MS, marginMs: MARGIN_MS, callBoundMs: CALL_BOUND_MS, renewedAt: 0 });
  const etcd = new FakeEtcd(clock);
  setUp(etcd);
  clock.t = startAt;
  const deps = { cluster: 't', etcd, provider: {} as InfraProvider, store, writer, clock, failpoint: () => undefined };
  let outcome: unknown;
  try {
    outcome = await execute(deps, o, { machineActions: [], membershipAction: action, waits: [], conditions: [], requeueAfterMs: 0, converged: false, phases: {} });
  } catch (error) {
    outcome = error;
  }
  const events = await store.listEvents('t');
  return { calls: etcd.calls, outcome, events };
}

describe('membership calls fit inside the lease renew deadline', () => {
  const { machines, members } = healthyCluster(3);
  const removal: MembershipAction = { kind: 'RemoveMember', memberId: memberIdOf('t-3'), machine: 't-3', peerURL: 'http://127.77.1.3:2380', reason: 'ScaleDown' };

  test('with time for the re-check and the call, the removal is made', async () => {
    const { calls } = await run(0, observed({ machines, members }), removal);
    assert.deepEqual(calls, [`status ${clientURLOf('t-1')}`, `status ${clientURLOf('t-2')}`, `remove ${memberIdOf('t-3')}`]);
  });

  test('time for one call but not for the re-check and the call: nothing is sent, refused, the next pass observes', async () => {
    // At 4 s a call ends by 7 s (inside 9 s), but the re-check and then the removal could end at 10 s.
    const { calls, outcome, events } = await run(4000, observed({ machines, members }), removal);
    assert.deepEqual(calls, []);
    assert.ok(!(outcome instanceof Error), String(outcome));
    const event = events.find((e) => e.action === 'RemoveMember');
    assert.equal(event?.outcome, 'Refused');
    assert.match(event.message, /removal held: the lease of control plane t has 6000ms left, not enough for 2 more calls of up to 3000ms each/);
  });

  test('a re-check that ends past the point where the removal still fits: the removal is not made', async () => {
    // Starts at 2 s (fits), but the re-check takes 4.5 s: at 6.5 s the removal could end at 9.5 s.
    const { calls, outcome } = await run(2000, observed({ machines, members }), removal, (etcd) => {
      etcd.statusTakesMs = 2250;
    });
    assert.deepEqual(calls, [`status ${clientURLOf('t-1')}`, `status ${clientURLOf('t-2')}`]);
    assert.ok(outcome instanceof RenewDeadlineError, String(outcome));
  });

  const withLearner = observed({ machines: [...machines, machine('t-4', { phase: 'Learner' })], members: [...members, learner('t-4', { leader: memberIdOf('t-1') })] });
  const promotion: MembershipAction = { kind: 'PromoteLearner', machine: 't-4', memberId: memberIdOf('t-4'), reason: 'LearnerCaughtUp' };

  const voterChecks = ['t-1', 't-2', 't-3'].map((name) => `status ${clientURLOf(name)}`);

  test('a learner that still answers is promoted, after a status call to it and to the voters', async () => {
    const { calls } = await run(0, withLearner, promotion);
    assert.deepEqual(calls, [`status ${clientURLOf('t-4')}`, ...voterChecks, `promote ${memberIdOf('t-4')}`]);
  });

  test('a learner that stopped answering since it was observed is not promoted', async () => {
    const { calls, events } = await run(0, withLearner, promotion, (etcd) => etcd.silent.add(clientURLOf('t-4')));
    assert.deepEqual(calls, [`status ${clientURLOf('t-4')}`, ...voterChecks]);
    const event = events.find((e) => e.action === 'PromoteLearner');
    assert.equal(event?.outcome, 'Failed');
    assert.match(event.message, /promotion held: learner t-4 does not answer \(.*connection refused\) right now/);
  });

  test('voters that name the same leader in different raft terms hold a removal: a vote was held since the plan', async () => {
    const { calls, events } = await run(0, observed({ machines, members }), removal, (etcd) => etcd.terms.set(clientURLOf('t-2'), 3));
    assert.deepEqual(calls, [`status ${clientURLOf('t-1')}`, `status ${clientURLOf('t-2')}`]);
    const event = events.find((e) => e.action === 'RemoveMember');
    assert.equal(event?.outcome, 'Refused');
    assert.match(event.message, /removal held: the voters do not agree on a leader and term right now/);
  });

  test('voters that name the same leader in different raft terms hold a promotion', async () => {
    const { calls, events } = await run(0, withLearner, promotion, (etcd) => etcd.terms.set(clientURLOf('t-3'), 3));
    assert.ok(!calls.includes(`promote ${memberIdOf('t-4')}`), calls.join(', '));
    assert.match(events.find((e) => e.action === 'PromoteLearner')?.message ?? '', /promotion held: the voters do not agree on a leader and term right now/);
  });

  test('a promotion is held while too few voters answer right now for the grown voter set', async () => {
    // Four voters after the promotion need three healthy: the learner and one answering voter are two.
    const { calls, events } = await run(0, withLearner, promotion, (etcd) => {
      etcd.silent.add(clientURLOf('t-2'));
      etcd.silent.add(clientURLOf('t-3'));
    });
    assert.ok(!calls.includes(`promote ${memberIdOf('t-4')}`), calls.join(', '));
    assert.match(events.find((e) => e.action === 'PromoteLearner')?.message ?? '', /promotion held: 1 of 3 voters asked answer with the leader right now, and 4 voters need 3/);
  });

  test('a promotion whose learner check and call would not both fit is not started', async () => {
    const { calls, events } = await run(4000, withLearner, promotion);
    assert.deepEqual(calls, []);
    assert.equal(events.find((e) => e.action === 'PromoteLearner')?.outcome, 'Refused');
  });
});

test('renewals that failed past the deadline: the error names what the last renewal said, and a success clears it', async () => {
  const clock = new FakeClock(0);
  const store = new MemoryStateStore({ isHolderAlive: () => true });
  await store.applySpec(defaultControlPlane('t'), 0);
  assert.ok(await store.acquireLease('t', { token: 'token-1', holder: 'test', host: 'test', pid: 1, ttlMs: TTL_MS }, 0));
  const stalled = (): FencedWriter => new FencedWriter(store, { cluster: 't', token: 'token-1' }, { clock, ttlMs: TTL_MS, marginMs: MARGIN_MS, callBoundMs: CALL_BOUND_MS, renewedAt: 0 });
  const failing = stalled();
  failing.renewalFailed(new Error('database is locked'));
  clock.t = 8000;
  await assert.rejects(failing.verify(), (error: unknown) => error instanceof RenewDeadlineError && /last renewed 8000ms ago \(the last renewal failed: database is locked\)/.test(error.message));
  const recovered = stalled();
  recovered.renewalFailed(new Error('database is locked'));
  recovered.renewed(0);
  await assert.rejects(recovered.verify(), (error: unknown) => error instanceof RenewDeadlineError && !error.message.includes('failed'));
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defaultControlPlane, validateControlPlane } from '../../src/api/control-plane.ts';
import { ELECTION_TIMEOUT_MS } from '../../src/planner/guard.ts';
import { plan } from '../../src/planner/plan.ts';
import { REQUEUE } from '../../src/planner/requeue.ts';
import { toPlannerSpec } from '../../src/planner/spec.ts';
import type { Decision, Observed, ObservedMember, PlannerSpec, VoterReading } from '../../src/planner/types.ts';
import { keepReadings, readingOf } from '../../src/reconciler/readings.ts';
import { healthyCluster, learner, machine, memberIdOf, NOW, observed, RAFT_INDEX, spec, voter } from '../support/observed.ts';

/** The same rules in both modes, except where fastplane's own checks stand in for etcd's. */
const GUARDED_HASH = toPlannerSpec(validateControlPlane({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name: 't' }, spec: { etcd: { reconfigurationCheck: 'fastplane' } } })).templateHash;
const guarded = (over: Parameters<typeof spec>[0] = {}): PlannerSpec => spec({ ...over, reconfigurationCheck: 'fastplane', templateHash: GUARDED_HASH });
const codes = (d: Decision): string[] => d.waits.map((w) => w.code);

/**
 * The same observation with its machines made under the guarded template: the mode is an etcd flag,
 * so machines made under the other mode are outdated (a rollout) and would hide the rule under test.
 */
function made(o: Observed): Observed {
  const hash = guarded().templateHash;
  return { ...o, machines: o.machines.map((m) => ({ ...m, record: { ...m.record, templateHash: hash } })) };
}
/** plan() in guarded mode on machines made under it. */
const guardedPlan = (o: Observed, over: Parameters<typeof spec>[0] = {}): Decision => plan(guarded(over), made(o), NOW);

/** A voter whose status names `leader` in `term` (the builders use term 2). */
function inTerm(member: ObservedMember, term: number): ObservedMember {
  if (member.status?.ok !== true) return member;
  return { ...member, status: { ok: true, status: { ...member.status.status, raftTerm: term } } };
}

/** A reading `ago` ms before NOW: every listed machine's member names t-1 at the given index lag. */
function reading(ago: number, lag: Record<string, number> = {}, leader = 't-1', names = ['t-1', 't-2', 't-3']): VoterReading {
  const statuses: VoterReading['statuses'] = {};
  for (const name of names) statuses[memberIdOf(name)] = { leaderId: memberIdOf(leader), raftTerm: 2, raftIndex: RAFT_INDEX - (lag[name] ?? 0) };
  return { at: NOW - ago, statuses };
}

/** 3 healthy voters, t-1 leading, t-2 picked for deletion: the next change is t-2's removal. */
function removingT2(readings: VoterReading[]): Observed {
  const c = healthyCluster(3);
  c.machines[1] = machine('t-2', { phase: 'Voter', deleteRequested: true });
  const o = observed(c);
  if (readings.length > 0) o.earlierReadings = readings;
  return o;
}

describe('guarded reconfiguration: adds', () => {
  test('a voter in another raft term holds the add; etcd mode leaves that to etcd', () => {
    const c = healthyCluster(3);
    c.machines.push(machine('t-4'));
    c.members[2] = inTerm(c.members[2] as ObservedMember, 3);
    const o = observed(c);
    // 4 replicas: no machine to create, so the pass's requeue is the wait's own.
    const held = guardedPlan(o, { replicas: 4 });
    assert.equal(held.membershipAction, undefined);
    assert.ok(codes(held).includes('VoterOutOfStep'), JSON.stringify(held.waits));
    assert.equal(held.requeueAfterMs, REQUEUE.fast);
    assert.equal(plan(spec({ replicas: 5 }), o, NOW).membershipAction?.kind, 'AddLearner');
    // In step again: the add goes ahead at once, with no 5 s rule to wait out.
    assert.deepEqual(guardedPlan(observed({ ...healthyCluster(3), machines: [...healthyCluster(3).machines, machine('t-4')] }), { replicas: 5 }).membershipAction, {
      kind: 'AddLearner',
      machine: 't-4',
      reason: 'JoinNextMachine',
    });
  });

  test('no add while the learner slot is taken: a learner never counts toward quorum, but it holds the slot', () => {
    const c = healthyCluster(3);
    c.machines.push(machine('t-4', { phase: 'Learner' }), machine('t-5'));
    c.members.push(learner('t-4', { raftAppliedIndex: RAFT_INDEX - 500 }));
    const d = guardedPlan(observed(c), { replicas: 5 });
    assert.equal(d.membershipAction, undefined);
    assert.ok(codes(d).includes('LearnerCatchingUp'));
  });
});

describe('guarded reconfiguration: promotions', () => {
  const withLearner = (edit: (members: ObservedMember[]) => void, learnerOpts: Parameters<typeof learner>[1] = {}): Observed => {
    const c = healthyCluster(3);
    c.machines.push(machine('t-4', { phase: 'Learner' }));
    c.members.push(learner('t-4', learnerOpts));
    edit(c.members);
    return observed(c);
  };

  test('promotes a learner that answers and is within 10 of the leader', () => {
    assert.deepEqual(guardedPlan(withLearner(() => undefined, { raftAppliedIndex: RAFT_INDEX - 10 }), { replicas: 5 }).membershipAction, {
      kind: 'PromoteLearner',
      machine: 't-4',
      memberId: memberIdOf('t-4'),
      reason: 'LearnerCaughtUp',
    });
    const behind = guardedPlan(withLearner(() => undefined, { raftAppliedIndex: RAFT_INDEX - 11 }), { replicas: 5 });
    assert.equal(behind.membershipAction, undefined);
    assert.deepEqual(codes(behind), ['LearnerCatchingUp']);
    const silent = guardedPlan(withLearner(() => undefined, { statusError: 'context deadline exceeded' }), { replicas: 5 });
    assert.deepEqual(codes(silent), ['LearnerStarting']);
  });

  test('counts only voters in the leader term toward the quorum after promotion', () => {
    // t-2 names the leader but in a newer term, t-3 does not answer: etcd mode counts t-1 and t-2
    // healthy (2 + the learner = 3 of 4), guarded mode only t-1 (2 of 4).
    const o = withLearner((members) => {
      members[1] = inTerm(members[1] as ObservedMember, 3);
      members[2] = voter('t-3', { statusError: 'context deadline exceeded' });
    });
    assert.equal(plan(spec({ replicas: 5 }), o, NOW).membershipAction?.kind, 'PromoteLearner');
    const d = guardedPlan(o, { replicas: 5 });
    assert.equal(d.membershipAction, undefined);
    assert.ok(codes(d).includes('PromotionQuorumUnproven'), JSON.stringify(d.waits));
    assert.ok(codes(d).includes('VoterOutOfStep'));
  });
});

describe('guarded reconfiguration: removals', () => {
  test('waits for readings spanning an election timeout; etcd mode removes at once', () => {
    assert.equal(plan(spec(), removingT2([]), NOW).membershipAction?.kind, 'RemoveMember');
    for (const readings of [[], [reading(ELECTION_TIMEOUT_MS - 1)]]) {
      const d = guardedPlan(removingT2(readings));
      assert.equal(d.membershipAction, undefined);
      assert.deepEqual(codes(d), ['ConnectivityUnproven']);
    }
    const d = guardedPlan(removingT2([reading(1500), reading(ELECTION_TIMEOUT_MS), reading(400)]));
    assert.deepEqual(d.membershipAction, { kind: 'RemoveMember', memberId: memberIdOf('t-2'), peerURL: 'http://127.77.1.2:2380', machine: 't-2', reason: 'ScaleDown' });
  });

  test('a voter that answers now but fell behind the leader since the reference reading does not count', () => {
    // t-3 looks healthy in this pass, but 600 ms ago it was 50 entries behind: cut off from the
    // leader. Without it, only t-1 of the 2 voters left is proven: no quorum.
    const d = guardedPlan(removingT2([reading(1200), reading(600, { 't-3': 50 })]));
    assert.equal(d.membershipAction, undefined);
    const wait = d.waits.find((w) => w.code === 'VotersNotConnected');
    assert.ok(wait, JSON.stringify(d.waits));
    assert.match(wait.message, /not shown by t-3/);
    // Exactly the margin (10) still counts.
    assert.equal(guardedPlan(removingT2([reading(1200, { 't-3': 10 })])).membershipAction?.kind, 'RemoveMember');
  });

  test('readings under another leader prove nothing about this one', () => {
    const d = guardedPlan(removingT2([reading(1500, {}, 't-3')]));
    assert.equal(d.membershipAction, undefined);
    assert.ok(codes(d).includes('VotersNotConnected'));
  });

  test('the leader is never removed (leadership moves first), and a dead voter stays removable', () => {
    const c = healthyCluster(3);
    c.machines[0] = machine('t-1', { phase: 'Voter', deleteRequested: true });
    const moved = guardedPlan({ ...observed(c), earlierReadings: [reading(2000)] });
    assert.equal(moved.membershipAction?.kind, 'MoveLeader');

    // t-3 is dead and failed: the two voters left (t-1, t-2) kept up, so it goes.
    const dead = healthyCluster(3);
    dead.machines[2] = machine('t-3', { phase: 'Voter', failed: true, memberRunning: false });
    dead.members[2] = voter('t-3', { statusError: 'connection refused' });
    const d = guardedPlan({ ...observed(dead), earlierReadings: [reading(2000, {}, 't-1', ['t-1', 't-2'])] });
    assert.deepEqual(d.membershipAction, { kind: 'RemoveMember', memberId: memberIdOf('t-3'), peerURL: 'http://127.77.1.3:2380', machine: 't-3', reason: 'Remediation' });
  });
});

describe('guarded reconfiguration: spec and readings', () => {
  test('the mode is part of the machine template, and its default leaves existing hashes alone', () => {
    const manifest = (etcd: Record<string, unknown>) => validateControlPlane({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name: 't' }, spec: { etcd } });
    const before = toPlannerSpec(defaultControlPlane('t')).templateHash;
    assert.equal(toPlannerSpec(manifest({ reconfigurationCheck: 'etcd' })).templateHash, before);
    assert.notEqual(toPlannerSpec(manifest({ reconfigurationCheck: 'fastplane' })).templateHash, before);
    assert.equal(toPlannerSpec(manifest({ reconfigurationCheck: 'fastplane' })).reconfigurationCheck, 'fastplane');
    assert.throws(() => manifest({ reconfigurationCheck: 'none' }), /spec\.etcd\.reconfigurationCheck: must be etcd or fastplane/);
  });

  test('a running member of a changed mode is outdated, so the rollout replaces it', () => {
    const o = observed(healthyCluster(3));
    const d = plan(guarded(), o, NOW);
    assert.ok(d.machineActions.some((a) => a.kind === 'CreateMachine' && a.reason === 'RollingOut'), JSON.stringify(d));
  });

  test('readings: one per 100 ms, none older than 10 s, each member by ID', () => {
    const o = observed(healthyCluster(3));
    const first = readingOf(o, 1000);
    assert.deepEqual(first?.statuses[memberIdOf('t-2')], { leaderId: memberIdOf('t-1'), raftTerm: 2, raftIndex: RAFT_INDEX });
    let kept = keepReadings([], first);
    kept = keepReadings(kept, readingOf(o, 1050));
    assert.deepEqual(kept.map((r) => r.at), [1000]);
    kept = keepReadings(kept, readingOf(o, 1100));
    kept = keepReadings(kept, readingOf(o, 11_050));
    assert.deepEqual(kept.map((r) => r.at), [1100, 11_050]);
    assert.equal(readingOf(observed({ members: 'no quorum' }), 1), undefined);
  });

  test('while machines provision, the next pass is when the provider expects one ready', () => {
    const soon = machine('t-1', { phase: 'Provisioning' });
    const later = machine('t-2', { phase: 'Provisioning' });
    const far = machine('t-3', { phase: 'Provisioning' });
    if (soon.infra) soon.infra.expectedReadyAt = NOW + 120;
    if (later.infra) later.infra.expectedReadyAt = NOW + 300;
    if (far.infra) far.infra.expectedReadyAt = NOW + 60_000;
    assert.equal(plan(spec(), observed({ machines: [soon, later, far] }), NOW).requeueAfterMs, 121);
    assert.equal(plan(spec({ replicas: 1 }), observed({ machines: [far] }), NOW).requeueAfterMs, REQUEUE.slow);
  });
});

describe('guarded reconfiguration: the guard follows what the members run', () => {
  /** The observation with `names`' members recorded as started with etcd's checks on (true) or off (false). */
  const startedWith = (o: Observed, strict: boolean, names: string[]): Observed => ({
    ...o,
    machines: o.machines.map((m) => (names.includes(m.record.name) ? { ...m, record: { ...m.record, strictReconfigCheck: strict } } : m)),
  });

  test('switched back to etcd, a removal still waits for readings while any member runs with etcd\'s checks off', () => {
    // The spec says etcd; t-3 was started under fastplane and has not been rolled yet.
    const o = startedWith(startedWith(removingT2([]), true, ['t-1', 't-2']), false, ['t-3']);
    const held = plan(spec(), o, NOW);
    assert.equal(held.membershipAction, undefined);
    assert.deepEqual(codes(held), ['ConnectivityUnproven']);
    const proven = plan(spec(), { ...o, earlierReadings: [reading(1500), reading(400)] }, NOW);
    assert.equal(proven.membershipAction?.kind, 'RemoveMember');
    // A voter that fell behind in a reading does not count, as in fastplane mode.
    assert.ok(codes(plan(spec(), { ...o, earlierReadings: [reading(1200), reading(600, { 't-3': 50 })] }, NOW)).includes('VotersNotConnected'));
  });

  test('switched back to etcd, an add waits for a voter in another term while any member runs with etcd\'s checks off', () => {
    const c = healthyCluster(3);
    c.machines.push(machine('t-4'));
    c.members[2] = inTerm(c.members[2] as ObservedMember, 3);
    const unchecked = startedWith(observed(c), false, ['t-1']);
    assert.ok(codes(plan(spec({ replicas: 5 }), unchecked, NOW)).includes('VoterOutOfStep'));
    assert.equal(plan(spec({ replicas: 5 }), startedWith(observed(c), true, ['t-1']), NOW).membershipAction?.kind, 'AddLearner');
  });

  test('once the last member started without the checks is gone, etcd guards again: no readings needed', () => {
    const o = startedWith(removingT2([]), true, ['t-1', 't-2', 't-3']);
    assert.equal(plan(spec(), o, NOW).membershipAction?.kind, 'RemoveMember');
    // A machine still recorded as unchecked whose member left the cluster (and whose process stopped) does not count.
    const left = healthyCluster(3);
    left.machines.push(machine('t-4', { phase: 'Deleting', deleteRequested: true, memberRunning: false }));
    const gone = startedWith(startedWith(observed(left), true, ['t-1', 't-2', 't-3']), false, ['t-4']);
    gone.machines[1] = { ...(gone.machines[1] as Observed['machines'][number]), record: { ...(gone.machines[1] as Observed['machines'][number]).record, deleteRequested: { reason: 'ScaleDown', at: NOW } } };
    assert.equal(plan(spec(), gone, NOW).membershipAction?.kind, 'RemoveMember');
  });
});

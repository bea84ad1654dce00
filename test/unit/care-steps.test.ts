import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BlockedError } from '../../src/care/blocked-error.ts';
import { forcedBackStep, quorumBackStep } from '../../src/care/recover.ts';
import { rollingStep, stopVoterStep, voterBackStep } from '../../src/care/rolling.ts';
import { NOT_STARTED, type RollingProgress } from '../../src/domain/care-job.ts';
import { done, failed, proceed, requeueAfter, runSteps, type StepResult } from '../../src/care/steps.ts';
import { FakeCluster, virtualClock } from '../support/fake-etcd-cluster.ts';

const endpoints = ['http://a:2379'];
const noLease = (): Promise<void> => Promise.resolve();
const kindOf = (r: StepResult): string => (r.kind === 'RequeueAfter' || r.kind === 'Error' ? `${r.kind} ${r.reason}` : r.kind);

describe('runSteps drives a care job to its end', () => {
  test('Continue runs the next step at once, RequeueAfter sleeps, Done returns the summary', async () => {
    const clock = virtualClock();
    const results = [proceed('one'), requeueAfter(300, 'VoterNotBack', 'not yet'), done('all done')];
    const notes: string[] = [];
    const summary = await runSteps(() => Promise.resolve(results.shift() ?? failed('Extra', 'asked once too often')), clock, 10_000, (n) => notes.push(n));
    assert.equal(summary, 'all done');
    assert.deepEqual(clock.slept, [300]);
    assert.deepEqual(notes, ['one']);
  });

  test('an Error, or a RequeueAfter past the deadline, is a BlockedError with its message', async () => {
    const clock = virtualClock();
    await assert.rejects(runSteps(() => Promise.resolve(failed('VoterLeft', 'member b left')), clock, 10_000), (e: unknown) => e instanceof BlockedError && e.message === 'member b left');
    await assert.rejects(runSteps(() => Promise.resolve(requeueAfter(400, 'LeaderUnknown', 'voters disagree')), clock, 1000), (e: unknown) => e instanceof BlockedError && e.message === 'voters disagree');
    assert.ok(clock.now() >= 1000, 'slept until the deadline');
  });
});

describe('rolling restart steps', () => {
  test('a follower: its work runs and the step is Done; stopped, it is not back until it answers again', async () => {
    const cluster = new FakeCluster(['a', 'b', 'c']);
    const worked: string[] = [];
    const stop = stopVoterStep(cluster.admin, endpoints, 'b', noLease, (v) => {
      worked.push(v.member.id);
      cluster.down.add('b');
      return Promise.resolve();
    });
    assert.equal(kindOf(await stop()), 'Done');
    assert.deepEqual(worked, ['b']);
    const back = voterBackStep(cluster.admin, endpoints, 'b');
    assert.equal(kindOf(await back()), 'RequeueAfter VoterNotBack');
    cluster.down.delete('b');
    assert.equal(kindOf(await back()), 'Done');
  });

  test('the leader: leadership moves off it first (RequeueAfter LeaderMoving), then it may stop', async () => {
    const cluster = new FakeCluster(['a', 'b', 'c']);
    const stop = stopVoterStep(cluster.admin, endpoints, 'a', noLease, () => Promise.resolve());
    assert.equal(kindOf(await stop()), 'RequeueAfter LeaderMoving');
    assert.deepEqual(cluster.moves, ['b']);
    assert.equal(kindOf(await stop()), 'Done');
  });

  test('what the gate waits for is the reason: a learner joining, quorum that would break; a lost member list or member is an Error', async () => {
    const joining = new FakeCluster(['a', 'b', 'c'], ['d']);
    assert.equal(kindOf(await stopVoterStep(joining.admin, endpoints, 'b', noLease, () => Promise.resolve())()), 'RequeueAfter LearnerJoining');
    const degraded = new FakeCluster(['a', 'b', 'c']);
    degraded.down.add('c');
    assert.equal(kindOf(await stopVoterStep(degraded.admin, endpoints, 'b', noLease, () => Promise.resolve())()), 'RequeueAfter QuorumWouldBreak');
    assert.equal(kindOf(await stopVoterStep(degraded.admin, endpoints, 'z', noLease, () => Promise.resolve())()), 'Error VoterLeft');
    degraded.listFails = true;
    assert.equal(kindOf(await stopVoterStep(degraded.admin, endpoints, 'b', noLease, () => Promise.resolve())()), 'Error MemberListUnavailable');
  });
});

describe('a rolling job, one step at a time', () => {
  test('its progress, kept as data between steps, carries it from the start to Done: followers first, the leader last', async () => {
    const cluster = new FakeCluster(['a', 'b', 'c']);
    const worked: string[] = [];
    const job = { admin: cluster.admin, endpoints, beforeEach: noLease, work: (v: { member: { id: string } }) => Promise.resolve(void worked.push(v.member.id)) };
    let progress: RollingProgress = NOT_STARTED;
    const kinds: string[] = [];
    for (let i = 0; i < 20 && kinds.at(-1) !== 'Done'; i++) {
      const next = await rollingStep(job, progress);
      kinds.push(kindOf(next.result));
      // Written to a record and read back, as a reconcile pass would keep it.
      progress = JSON.parse(JSON.stringify(next.progress)) as RollingProgress;
    }
    assert.deepEqual(worked, ['b', 'c', 'a']);
    assert.deepEqual(progress.done, ['b', 'c', 'a']);
    assert.equal(kinds.filter((k) => k === 'RequeueAfter LeaderMoving').length, 1);
    assert.equal(kinds.at(-1), 'Done');
  });

  test('an unhealthy cluster at the start is an Error; a voter not back holds the job', async () => {
    const cluster = new FakeCluster(['a', 'b', 'c']);
    cluster.down.add('c');
    const job = { admin: cluster.admin, endpoints, beforeEach: noLease, work: () => Promise.resolve() };
    assert.equal(kindOf((await rollingStep(job, NOT_STARTED)).result), 'Error ClusterUnhealthy');
    const held = await rollingStep(job, { started: true, done: [], awaiting: 'c' });
    assert.equal(kindOf(held.result), 'RequeueAfter VoterNotBack');
    assert.equal(held.progress.awaiting, 'c');
  });
});

describe('recovery steps', () => {
  test('quorum is back once a linearizable member list answers; the forced survivor once it runs alone', async () => {
    const cluster = new FakeCluster(['a', 'b', 'c']);
    cluster.listFails = true;
    assert.equal(kindOf(await quorumBackStep(cluster.admin, endpoints)()), 'RequeueAfter QuorumNotBack');
    const survivor = { machine: 'a', clientURL: 'http://a:2379', raftIndex: 1, source: 'status' as const, running: true, learner: false };
    assert.equal(kindOf(await forcedBackStep(cluster.admin, survivor)()), 'RequeueAfter SurvivorNotBack');
    cluster.listFails = false;
    assert.equal(kindOf(await quorumBackStep(cluster.admin, endpoints)()), 'Done');
    assert.equal(kindOf(await forcedBackStep(cluster.admin, survivor)()), 'RequeueAfter SurvivorNotBack', 'three members listed');
    cluster.members.splice(1);
    assert.equal(kindOf(await forcedBackStep(cluster.admin, survivor)()), 'Done');
  });
});

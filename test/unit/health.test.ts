import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { BlockedError } from '../../src/care/blocked-error.ts';
import { oneVoterAtATime } from '../../src/care/rolling.ts';
import { agreedLeader, isHealthyVoter, mayStopVoter, quorumHolds, type VoterReading } from '../../src/planner/health.ts';
import type { Clock } from '../../src/ports/clock.ts';
import type { EtcdAdmin, EtcdMember, EtcdMemberStatus } from '../../src/ports/etcd-admin.ts';

function voters(healthy: string[], down: string[] = [], leader = healthy[0]): VoterReading[] {
  return [...healthy.map((id) => ({ id, name: id, ...(leader === undefined ? {} : { leaderId: leader }) })), ...down.map((id) => ({ id, name: id }))];
}

describe('health', () => {
  test('a healthy voter answers, names a leader and is not reported stopped', () => {
    assert.equal(isHealthyVoter({ id: 'a', name: 'a', leaderId: 'b' }), true);
    assert.equal(isHealthyVoter({ id: 'a', name: 'a' }), false, 'no answer');
    assert.equal(isHealthyVoter({ id: 'a', name: 'a', leaderId: '0' }), false, 'answers but names no leader');
    assert.equal(isHealthyVoter({ id: 'a', name: 'a', leaderId: 'b', running: false }), false, 'a stale answer from a stopped machine');
  });

  test('a voter naming no leader contradicts nobody; one on a stopped machine naming another still disputes', () => {
    assert.equal(agreedLeader([...voters(['a', 'b']), { id: 'c', name: 'c', leaderId: '0' }]), 'a');
    assert.equal(agreedLeader([...voters(['a', 'b']), { id: 'c', name: 'c', leaderId: 'c', running: false }]), undefined);
    assert.equal(agreedLeader(voters([], ['a', 'b'])), undefined);
  });

  test('quorum holds while a majority of the voters stays healthy', () => {
    assert.equal(quorumHolds(3, 2), true);
    assert.equal(quorumHolds(3, 2, 1), false);
    assert.equal(quorumHolds(5, 4, 1), true);
    assert.equal(quorumHolds(0, 0), false);
  });

  test('a leader counts only when every healthy voter names it and it is a voter', () => {
    assert.equal(agreedLeader(voters(['a', 'b', 'c'])), 'a');
    assert.equal(agreedLeader([...voters(['a', 'b']), { id: 'c', name: 'c', leaderId: 'b' }]), undefined);
    assert.equal(agreedLeader(voters(['a', 'b'], [], 'x')), undefined);
  });

  test('a leader counts only when its claims agree on the raft term too: the same leader of an earlier term is stale', () => {
    const inTerm = (id: string, term: number): VoterReading => ({ id, name: id, leaderId: 'a', term });
    assert.equal(agreedLeader([inTerm('a', 3), inTerm('b', 3), inTerm('c', 3)]), 'a');
    assert.equal(agreedLeader([inTerm('a', 3), inTerm('b', 3), inTerm('c', 2)]), undefined);
  });

  test('a follower may stop while the healthy voters left keep quorum', () => {
    assert.deepEqual(mayStopVoter(voters(['a', 'b', 'c']), [], 'b'), { ok: true });
    assert.deepEqual(mayStopVoter(voters(['a', 'b', 'c', 'd'], ['e']), [], 'b'), { ok: true });
    const verdict = mayStopVoter(voters(['a', 'b'], ['c']), [], 'b');
    assert.equal(verdict.ok ? 'ok' : verdict.code, 'QuorumWouldBreak');
    assert.match(verdict.ok ? '' : verdict.message, /stopping b would leave 1 healthy of 3 voters \(quorum 2\); not answering: c/);
  });

  test('the leader first hands leadership on; a lone voter may restart', () => {
    const leader = mayStopVoter(voters(['a', 'b', 'c']), [], 'a');
    assert.equal(leader.ok ? 'ok' : leader.code, 'IsLeader');
    assert.deepEqual(mayStopVoter(voters(['a']), [], 'a'), { ok: true });
  });

  test('nothing stops while a learner joins, the voters disagree on the leader, or the member is no voter', () => {
    const codes = [
      mayStopVoter(voters(['a', 'b', 'c']), ['d'], 'b'),
      mayStopVoter([...voters(['a', 'b']), { id: 'c', name: 'c', leaderId: 'c' }], [], 'b'),
      mayStopVoter(voters(['a', 'b', 'c']), [], 'z'),
    ].map((v) => (v.ok ? 'ok' : v.code));
    assert.deepEqual(codes, ['LearnerJoining', 'LeaderUnknown', 'NotAVoter']);
  });
});

/** Voters on fake endpoints: each answers its status unless it is down; moving leadership takes effect at once. */
class FakeCluster {
  leader: string;
  readonly down = new Set<string>();
  readonly members: EtcdMember[];

  constructor(readonly ids: string[]) {
    this.leader = ids[0] ?? '';
    this.members = ids.map((id) => ({ id, name: id, peerURLs: [`http://${id}:2380`], clientURLs: [`http://${id}:2379`], isLearner: false }));
  }

  readonly admin = {
    memberList: () => Promise.resolve(this.members),
    status: (endpoint: string): Promise<EtcdMemberStatus> => {
      const id = new URL(endpoint).hostname;
      if (this.down.has(id)) return Promise.reject(new Error('connection refused'));
      return Promise.resolve({ memberId: id, leaderId: this.leader, raftIndex: 1, raftAppliedIndex: 1, raftTerm: 1, isLearner: false, version: '3.5.16', dbSize: 0, errors: [] });
    },
    moveLeader: (_endpoint: string, target: string) => {
      this.leader = target;
      return Promise.resolve();
    },
  } as unknown as EtcdAdmin;
}

function virtualClock(): Clock {
  let now = 0;
  return {
    now: () => now,
    sleep: (ms) => {
      now += ms;
      return Promise.resolve();
    },
  };
}

describe('rolling restarts behind the health gate', () => {
  const endpoints = ['http://a:2379'];

  test('followers first, the leader last after leadership moved, each stopped voter back before the next', async () => {
    const cluster = new FakeCluster(['a', 'b', 'c']);
    const order: string[] = [];
    await oneVoterAtATime(cluster.admin, endpoints, { clock: virtualClock(), healthTimeoutMs: 10_000, beforeEach: () => Promise.resolve() }, async (voter) => {
      assert.equal(cluster.down.size, 0, 'one voter down at a time');
      order.push(`${voter.member.id}${voter.member.id === cluster.leader ? ' (leader)' : ''}`);
      cluster.down.add(voter.member.id);
      await Promise.resolve();
      cluster.down.delete(voter.member.id);
    });
    assert.deepEqual(order, ['b', 'c', 'a']);
    assert.notEqual(cluster.leader, 'a');
  });

  test('a voter lost midway stops the restarts of a three-voter cluster: the next stop would break quorum', async () => {
    const cluster = new FakeCluster(['a', 'b', 'c']);
    const restarted: string[] = [];
    const run = oneVoterAtATime(cluster.admin, endpoints, { clock: virtualClock(), healthTimeoutMs: 10_000, beforeEach: () => Promise.resolve() }, (voter) => {
      restarted.push(voter.member.id);
      cluster.down.add('c');
      return Promise.resolve();
    });
    await assert.rejects(run, (error: unknown) => error instanceof BlockedError && /stopping c would leave|does not answer/.test(error.message));
    assert.deepEqual(restarted, ['b']);
  });

  test('with five voters the same loss leaves quorum to spare: the chosen voters are restarted, as the planner would allow', async () => {
    const cluster = new FakeCluster(['a', 'b', 'c', 'd', 'e']);
    const restarted: string[] = [];
    await oneVoterAtATime(cluster.admin, endpoints, { clock: virtualClock(), healthTimeoutMs: 10_000, beforeEach: () => Promise.resolve(), only: new Set(['b', 'c', 'a']) }, (voter) => {
      restarted.push(voter.member.id);
      cluster.down.add('e');
      return Promise.resolve();
    });
    assert.deepEqual(restarted, ['b', 'c', 'a']);
  });
});

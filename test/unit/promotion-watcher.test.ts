import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { test } from 'node:test';
import { PromotionWatcher, promotionLatencyMs, type WatchedJoin } from '../../src/bench/promotion-watcher.ts';
import type { EtcdAdmin, EtcdMember, EtcdMemberStatus } from '../../src/ports/etcd-admin.ts';

const LEADER = 'https://10.0.0.1:2379';
const LEARNER = 'https://10.0.0.2:2379';

/** A learner's life in steps of member-list calls: not started, started behind, caught up, promoted. */
function scriptedAdmin(): { admin: EtcdAdmin; lists: () => number } {
  let lists = 0;
  const stage = (): number => (lists < 3 ? 0 : lists < 6 ? 1 : lists < 9 ? 2 : 3);
  const member = (id: string, url: string, isLearner: boolean, started: boolean): EtcdMember => ({ id, name: started ? id : '', peerURLs: [url.replace('2379', '2380')], clientURLs: started ? [url] : [], isLearner });
  const status = (memberId: string, applied: number, isLearner: boolean): EtcdMemberStatus => ({ memberId, leaderId: '1', raftIndex: applied, raftAppliedIndex: applied, raftTerm: 2, isLearner, version: '3.4.23', dbSize: 0, errors: [] });
  const admin = {
    memberList: () => {
      lists++;
      return Promise.resolve([member('1', LEADER, false, true), member('2', LEARNER, stage() < 3, stage() >= 1)]);
    },
    status: (endpoint: string) => Promise.resolve(endpoint === LEADER ? status('1', 100, false) : status('2', stage() === 1 ? 5 : 95, true)),
  } as unknown as EtcdAdmin;
  return { admin, lists: () => lists };
}

test('the watcher records a learner caught up (within 10 of the leader) and then listed as a voter', async () => {
  const { admin, lists } = scriptedAdmin();
  const watcher = new PromotionWatcher(admin, () => Promise.resolve([LEADER, LEARNER]));
  watcher.start();
  while (lists() < 11) await sleep(5);
  const joins = await watcher.stop();
  const join = joins.get('https://10.0.0.2:2380');
  assert.ok(join, 'the learner was seen');
  assert.ok(join.lastBehindAt !== null, 'read while behind (applied 5 of 100)');
  assert.ok(join.caughtUpAt !== null && join.caughtUpAt >= join.lastBehindAt, 'then caught up (95 of 100)');
  assert.ok(join.voterAt !== null && join.voterAt >= join.caughtUpAt, 'then listed as a voter');
  assert.equal(promotionLatencyMs(join), join.voterAt - join.caughtUpAt);
  assert.equal(joins.size, 1, 'the leader is no join');
});

test('promotionLatencyMs: from caught up, else from the last reading behind, null without a voter listing', () => {
  const join = (over: Partial<WatchedJoin>): WatchedJoin => ({ peerURL: 'p', learnerAt: 0, caughtUpAt: null, lastBehindAt: null, voterAt: null, ...over });
  assert.equal(promotionLatencyMs(join({ caughtUpAt: 100, lastBehindAt: 80, voterAt: 160 })), 60);
  assert.equal(promotionLatencyMs(join({ lastBehindAt: 80, voterAt: 160 })), 80);
  assert.equal(promotionLatencyMs(join({ caughtUpAt: 100 })), null);
  assert.equal(promotionLatencyMs(join({ voterAt: 160 })), null);
});

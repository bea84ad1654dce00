import assert from 'node:assert/strict';
import { test } from 'node:test';
import { addAllowedAt, addRuleFor, criticalPathBound, type AddRule, type BoundInputs } from '../../src/bench/critical-path-bound.ts';

// Every expected figure below is worked out by hand from the model in the module's comment.

const fiveAt30 = (addRule: AddRule, replicas = 5): BoundInputs => ({
  readySeconds: Array.from({ length: replicas }, () => 30),
  initSeconds: 0.3,
  joinSeconds: 0.2,
  addRule,
  connectedSeconds: 5,
  existingVoters: 0,
});

test('all-voters rule (3.4, 3.5 < 3.5.30): every add after the first waits 5 s from the previous add', () => {
  const bound = criticalPathBound(fiveAt30('all-voters'));
  // init 30 + 0.3; adds at 30.3, 35.3, 40.3, 45.3; last promoted 45.3 + 0.2.
  assert.equal(bound.initDoneAt, 30.3);
  assert.deepEqual(
    bound.joins.map((j) => [j.addAt, j.promotedAt, j.ruleWaitSeconds]),
    [
      [30.3, 30.5, 0],
      [35.3, 35.5, 4.8],
      [40.3, 40.5, 4.8],
      [45.3, 45.5, 4.8],
    ],
  );
  assert.equal(bound.seconds, 45.5);
});

test('quorum-of-resulting rule (3.5.30+): the 5th member needs no wait, so one 5 s disappears', () => {
  const bound = criticalPathBound(fiveAt30('quorum-of-resulting'));
  // 3rd: 2 voters -> 3, quorum 2: the leader and the 2nd (added 30.3) -> 35.3.
  // 4th: 3 -> 4, quorum 3: the leader, 2nd and 3rd (35.3) -> 40.3.
  // 5th: 4 -> 5, quorum 3: the leader, 2nd and 3rd, both connected 5 s by 40.3 -> right after the 4th's promotion, 40.5.
  assert.deepEqual(
    bound.joins.map((j) => j.addAt),
    [30.3, 35.3, 40.3, 40.5],
  );
  assert.equal(bound.seconds, 40.7);
});

test('quorum-of-resulting with 7 members: the 6th waits for the 4th, the 7th not at all', () => {
  const bound = criticalPathBound(fiveAt30('quorum-of-resulting', 7));
  // 6th: 5 -> 6, quorum 4: the leader + 3 of (30.3, 35.3, 40.3, 40.5) -> the 3rd earliest 40.3 + 5 = 45.3.
  // 7th: 6 -> 7, quorum 4: 3 of (30.3, 35.3, 40.3, 40.5, 45.3) -> 45.3 has passed at 45.5.
  assert.deepEqual(
    bound.joins.map((j) => j.addAt),
    [30.3, 35.3, 40.3, 40.5, 45.3, 45.5],
  );
  assert.equal(bound.seconds, 45.7);
});

test('no rule: joins back to back, one join each', () => {
  const bound = criticalPathBound(fiveAt30('none'));
  assert.deepEqual(
    bound.joins.map((j) => j.addAt),
    [30.3, 30.5, 30.7, 30.9],
  );
  assert.equal(bound.seconds, 31.1);
});

test('slow provisioning dominates: machines join in the order they became ready, the rule never binds', () => {
  const bound = criticalPathBound({ readySeconds: [10, 50, 20], initSeconds: 1, joinSeconds: 0.5, addRule: 'all-voters', connectedSeconds: 5, existingVoters: 0 });
  // init machine 0 serves at 11; machine 2 added at 20 (ready), promoted 20.5; machine 1 at 50 (ready; the rule allowed 25).
  assert.equal(bound.initDoneAt, 11);
  assert.deepEqual(
    bound.joins.map((j) => [j.machine, j.addAt, j.promotedAt, j.ruleWaitSeconds]),
    [
      [2, 20, 20.5, 0],
      [1, 50, 50.5, 0],
    ],
  );
  assert.equal(bound.seconds, 50.5);
});

test('a scale-up from a serving member (after a preload): no init, a join longer than 5 s spaces the adds itself', () => {
  const bound = criticalPathBound({ readySeconds: [2, 2], initSeconds: 99, joinSeconds: 7, addRule: 'all-voters', connectedSeconds: 5, existingVoters: 1 });
  // 1st add at 2 (ready; the only voter is the leader), promoted 9; 2nd: slot free at 9, rule allows 7 -> 9, promoted 16.
  assert.equal(bound.initDoneAt, null);
  assert.deepEqual(
    bound.joins.map((j) => [j.addAt, j.promotedAt, j.ruleWaitSeconds]),
    [
      [2, 9, 0],
      [9, 16, 0],
    ],
  );
  assert.equal(bound.seconds, 16);
});

test('parallel learners (etcd 3.6 --max-learners): every add at once, catch-ups overlap, promotions one after another', () => {
  // A scale-up 1 -> 5 from a serving member, joins of 7 s (a keyspace to catch up), the 3.6 rule.
  const inputs: BoundInputs = { readySeconds: [2, 2, 2, 2], initSeconds: 99, joinSeconds: 7, addRule: 'quorum-of-resulting', connectedSeconds: 5, existingVoters: 1 };
  const one = criticalPathBound(inputs);
  assert.deepEqual(one.joins.map((j) => j.promotedAt), [9, 16, 23, 30], 'one learner at a time: four catch-ups end to end');
  // Limit 8: the rule counts voters only, and only the leader votes while all four are learners, so all
  // four are added at 2; each promotion waits for its own catch-up (9) and for the one before it.
  const many = criticalPathBound({ ...inputs, learnerLimit: 8 });
  assert.deepEqual(
    many.joins.map((j) => [j.addAt, j.promotedAt]),
    [
      [2, 9],
      [2, 9],
      [2, 9],
      [2, 9],
    ],
  );
  assert.equal(many.seconds, 9);
  // Limit 2: the third add waits for a free slot (9); the voters then are the leader and the two
  // promoted learners, connected since 2, so the rule allowed it from 7.
  const two = criticalPathBound({ ...inputs, learnerLimit: 2 });
  assert.deepEqual(
    two.joins.map((j) => [j.addAt, j.promotedAt]),
    [
      [2, 9],
      [2, 9],
      [9, 16],
      [9, 16],
    ],
  );
});

test('addAllowedAt: with only the leader voting, no rule waits', () => {
  for (const rule of ['all-voters', 'quorum-of-resulting', 'none'] as const) assert.equal(addAllowedAt(rule, [], 5), -Infinity);
  assert.equal(addAllowedAt('all-voters', [1, 3, 2], 5), 8);
  assert.equal(addAllowedAt('quorum-of-resulting', [1, 3, 2], 5), 7, '4 voters and the new one make 5, quorum 3: the leader and the 2 earliest');
});

test('addRuleFor: the rule of each etcd version, none with the check off', () => {
  assert.equal(addRuleFor('3.4.23'), 'all-voters');
  assert.equal(addRuleFor('3.5.16'), 'all-voters');
  assert.equal(addRuleFor('3.5.29'), 'all-voters');
  assert.equal(addRuleFor('3.5.30'), 'quorum-of-resulting');
  assert.equal(addRuleFor('3.6.0'), 'quorum-of-resulting');
  assert.equal(addRuleFor('3.4.23', false), 'none');
});

test('an empty run has a zero bound', () => {
  assert.equal(criticalPathBound({ ...fiveAt30('all-voters'), readySeconds: [] }).seconds, 0);
});

test("with a keyspace, the leader's outbound rate holds back the promotions of learners that share it", () => {
  // 4 learners added together at 2; each catches up in 7 s on its own link. The leader sends 100 MB
  // per learner at 40 MB/s in all: the n-th promotion needs n snapshots sent, 2 + 2.5 n.
  const inputs = { readySeconds: [2, 2, 2, 2], initSeconds: 1, joinSeconds: 7, addRule: 'none' as const, connectedSeconds: 5, existingVoters: 1, learnerLimit: 8 };
  const shared = criticalPathBound({ ...inputs, leaderSend: { bytesPerLearner: 100e6, bytesPerSecond: 40e6 } });
  assert.deepEqual(
    shared.joins.map((j) => j.promotedAt),
    [9, 9, 9.5, 12],
  );
  // A leader fast enough for all of them changes nothing; with one learner at a time it never binds here.
  assert.equal(criticalPathBound({ ...inputs, leaderSend: { bytesPerLearner: 100e6, bytesPerSecond: 1e9 } }).seconds, criticalPathBound(inputs).seconds);
  const oneByOne = criticalPathBound({ ...inputs, learnerLimit: 1, leaderSend: { bytesPerLearner: 100e6, bytesPerSecond: 40e6 } });
  assert.equal(oneByOne.seconds, criticalPathBound({ ...inputs, learnerLimit: 1 }).seconds);
});

test('with a free learner slot, an add is not held to a rule set by promoting the learners already in', () => {
  // The run measured on the lab: three machines ready within 0.2 s, joins costed at 0.01 s. Promoting
  // the first learner at once would start a 5 s wait for the next add; a controller with slots to spare
  // adds first, so the bound must not assume the wait.
  const inputs: BoundInputs = { readySeconds: [2.862, 2.748, 2.91], initSeconds: 0.01, joinSeconds: 0.01, addRule: 'quorum-of-resulting', connectedSeconds: 5, existingVoters: 0, learnerLimit: 8 };
  const bound = criticalPathBound(inputs);
  assert.deepEqual(bound.joins.map((j) => j.ruleWaitSeconds), [0, 0]);
  assert.ok(bound.seconds < 3, `bound ${String(bound.seconds)} s`);
  // With one slot the second add must follow the first promotion, and the rule holds it.
  assert.ok(criticalPathBound({ ...inputs, learnerLimit: 1 }).joins[1]!.ruleWaitSeconds > 4);
});

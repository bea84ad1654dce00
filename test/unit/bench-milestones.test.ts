import assert from 'node:assert/strict';
import { test } from 'node:test';
import { criticalPathBound, type BoundInputs } from '../../src/bench/critical-path-bound.ts';
import { milestonesAhead, MILESTONE_RESOLUTION_SECONDS } from '../../src/bench/milestones.ts';

// Three machines ready at 5 s, restore 2 s, catch-up 4 s, two learners at once whose snapshots share
// the leader's 10 MB/s: 50 MB each. By hand: init serves at 7; adds at 7 and 7 (no rule); the first
// promotion at max(7 + 4, 7 + 50/10) = 12; the second at max(7 + 4, 12, 7 + 100/10) = 17.
const inputs: BoundInputs = {
  readySeconds: [5, 5, 5],
  initSeconds: 2,
  joinSeconds: 4,
  addRule: 'none',
  connectedSeconds: 5,
  existingVoters: 0,
  learnerLimit: 2,
  leaderSend: { bytesPerLearner: 50e6, bytesPerSecond: 10e6 },
};
const bound = criticalPathBound(inputs);

test('the bound of the example, worked out by hand', () => {
  assert.equal(bound.initDoneAt, 7);
  assert.deepEqual(
    bound.joins.map((j) => [j.addAt, j.promotedAt]),
    [
      [7, 12],
      [7, 17],
    ],
  );
  assert.equal(bound.seconds, 17);
});

test('a run behind its bound at every milestone is not ahead anywhere', () => {
  const ahead = milestonesAhead(bound, inputs.joinSeconds, {
    initServingAt: 7.4,
    promotedAt: [17.5, 12.2],
    catchUps: [
      { machine: 'm2', seconds: 4.1 },
      { machine: 'm3', seconds: 10.2 },
    ],
  });
  assert.deepEqual(ahead, []);
});

test('a run ahead at the first promotion only is caught there, though it ends behind its bound', () => {
  const ahead = milestonesAhead(bound, inputs.joinSeconds, { initServingAt: 7.1, promotedAt: [9.5, 18], catchUps: [{ machine: 'm2', seconds: 4.2 }] });
  assert.deepEqual(ahead, [{ milestone: 'promotion 1', observedSeconds: 9.5, boundSeconds: 12 }]);
});

test('an init that served early and a catch-up faster than the calibrated one are each named', () => {
  const ahead = milestonesAhead(bound, inputs.joinSeconds, { initServingAt: 6.5, promotedAt: [12, 17], catchUps: [{ machine: 'm3', seconds: 3.2 }] });
  assert.deepEqual(
    ahead.map((a) => a.milestone),
    ['init serving', 'm3 catch-up'],
  );
  assert.deepEqual(ahead[0], { milestone: 'init serving', observedSeconds: 6.5, boundSeconds: 7 });
});

test('within the calibration resolution of a milestone is on it, past that is ahead', () => {
  const on = 12 - MILESTONE_RESOLUTION_SECONDS / 2;
  const past = 12 - MILESTONE_RESOLUTION_SECONDS * 2;
  assert.deepEqual(milestonesAhead(bound, inputs.joinSeconds, { initServingAt: null, promotedAt: [on], catchUps: [] }), []);
  assert.equal(milestonesAhead(bound, inputs.joinSeconds, { initServingAt: null, promotedAt: [past], catchUps: [] }).length, 1);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { runCatchUps } from '../support/catch-up-lab.ts';
import { spec } from '../support/observed.ts';
import { RUNS } from './arbitraries.ts';

// Catch-ups paced by the leader's measured uplink (src/planner/catch-up-budget.ts), on the pass-by-pass
// link model of test/support/catch-up-lab.ts, over uplinks and learner rates either side of each other.

const MB = 1_000_000;
/** One pass of the model: a wait ends at a pass, so finishing times compare to within one. */
const PASS_MS = 200;

const linksArb = fc.record({
  uplinkBytesPerSecond: fc.integer({ min: 6, max: 200 }).map((n) => n * MB),
  learnerBytesPerSecond: fc.integer({ min: 6, max: 200 }).map((n) => n * MB),
  snapshotBytes: fc.integer({ min: 1, max: 30 }).map((n) => n * MB),
});

test('with maxLearners auto the first catch-up starts at once, learners never exceed the limit, every one is promoted, and never later than one at a time (1.02x)', () => {
  fc.assert(
    fc.property(linksArb, fc.integer({ min: 1, max: 8 }), (links, limit) => {
      const auto = runCatchUps(spec({ replicas: 6, version: '3.6.17', maxLearners: limit, paceCatchUps: true }), links);
      const oneAtATime = runCatchUps(spec({ replicas: 6, version: '3.6.17', maxLearners: 1, paceCatchUps: false }), links);
      assert.match(auto.timeline, /^AddLearner t-4 at 0\.0 s/, 'the first catch-up is never held');
      assert.ok(auto.mostLearners <= limit, `${String(auto.mostLearners)} learners at once, limit ${String(limit)}`);
      assert.equal(auto.promoted, 3, auto.timeline);
      assert.ok(auto.finishedAfterMs !== undefined && oneAtATime.finishedAfterMs !== undefined);
      assert.ok(auto.finishedAfterMs <= oneAtATime.finishedAfterMs * 1.02 + PASS_MS, `auto ${auto.timeline}; one at a time ${oneAtATime.timeline}`);
    }),
    { numRuns: RUNS },
  );
});

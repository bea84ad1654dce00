import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { LearnerProgress } from '../../src/domain/machine.ts';
import { learnerAdvance, RECEIVE_QUIET_MS } from '../../src/planner/learner-progress.ts';
import type { ObservedMember } from '../../src/planner/types.ts';
import { learner, machine, NOW } from '../support/observed.ts';

// A learner's receive rate (src/planner/learner-progress.ts), kept in its record from one pass to the
// next as observationWrites does: windows of at least a second of data-dir growth, the first reading
// once started only the baseline.

const MB = 1_000_000;
/** etcd's WAL segment, preallocated twice when a member starts (the segment and the next one). */
const WAL_PREALLOCATED = 2 * 64 * MB;

const named = learner('t-4', { statusError: 'context deadline exceeded', version: '3.6.17' });
const unnamed: ObservedMember = { ...named, name: '', clientURLs: [] };
delete unnamed.status;

/** Feeds readings (ms after NOW, data-dir bytes, whether the learner is named yet) through learnerAdvance, recording as the reconciler does. */
function record(readings: readonly { at: number; bytes: number; named?: boolean }[]): (LearnerProgress | undefined)[] {
  let progress: LearnerProgress | undefined;
  return readings.map((r) => {
    const m = machine('t-4', { phase: 'Joining', version: '3.6.17', memberDataBytes: r.bytes, ...(progress ? { learnerProgress: progress } : {}) });
    const advance = learnerAdvance(m, r.named === false ? unnamed : named, NOW + r.at);
    if (advance) progress = advance;
    return progress;
  });
}

describe('learner receive rate', () => {
  test("the WAL etcd preallocates at start is the baseline, not data received: 12 MB in a second is 12 MB/s", () => {
    const states = record([
      { at: 0, bytes: 0, named: false },
      { at: 300, bytes: WAL_PREALLOCATED + 20_000 },
      { at: 500, bytes: WAL_PREALLOCATED + 20_000 + 2.4 * MB },
      { at: 1300, bytes: WAL_PREALLOCATED + 20_000 + 12 * MB },
    ]);
    assert.equal(states[0]?.receive, undefined, 'no baseline before the learner is named: its WAL may not exist yet');
    assert.deepEqual(states[1]?.receive, { from: { bytes: WAL_PREALLOCATED + 20_000, at: NOW + 300 } });
    assert.equal(states[2]?.receive?.since, NOW + 500, 'its snapshot began to arrive');
    assert.equal(states[2].receive.latest, undefined, 'a window shorter than a second gives no rate');
    assert.deepEqual(states[3]?.receive?.latest, { bytesPerSecond: 12 * MB, from: NOW + 300 });
    assert.equal(states[3].receive.peak, 12 * MB);
  });

  test('a slowed learner keeps the peak it reached and shows its latest rate', () => {
    const base = 130 * MB;
    const states = record([
      { at: 0, bytes: base },
      { at: 200, bytes: base + 2 * MB },
      { at: 1000, bytes: base + 12 * MB },
      { at: 1500, bytes: base + 15 * MB },
      { at: 2000, bytes: base + 18 * MB },
    ]);
    const last = states.at(-1)?.receive;
    assert.deepEqual(last?.latest, { bytesPerSecond: 6 * MB, from: NOW + 1000 });
    assert.equal(last.peak, 12 * MB);
  });

  test('a still spell restarts the window, so a wait before the snapshot does not dilute its rate', () => {
    const base = 130 * MB;
    const still = RECEIVE_QUIET_MS + 4000;
    const states = record([
      { at: 0, bytes: base },
      { at: still, bytes: base + 1 * MB },
      { at: still + 1000, bytes: base + 13 * MB },
    ]);
    assert.deepEqual(states[1]?.receive, { from: { bytes: base + 1 * MB, at: NOW + still }, since: NOW + still });
    assert.deepEqual(states.at(-1)?.receive?.latest, { bytesPerSecond: 12 * MB, from: NOW + still });
  });

  test('the baseline is recorded without growth and leaves the time of the last progress alone', () => {
    const m = machine('t-4', { phase: 'Joining', version: '3.6.17', memberDataBytes: 5 * MB, learnerProgress: { dataBytes: 5 * MB, at: NOW - 9000 } });
    const advance = learnerAdvance(m, named, NOW);
    assert.deepEqual(advance, { dataBytes: 5 * MB, at: NOW - 9000, receive: { from: { bytes: 5 * MB, at: NOW } } });
    // Once it has a baseline, an unchanged reading records nothing.
    const again = machine('t-4', { phase: 'Joining', version: '3.6.17', memberDataBytes: 5 * MB, learnerProgress: advance });
    assert.equal(learnerAdvance(again, named, NOW + 500), undefined);
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { learnerSnapshotFromLog } from '../../src/bench/etcd-log.ts';

// Lines of learners that caught up from a 150 MB snapshot (fields trimmed), as etcd 3.4.23 with
// --logger zap and 3.5.16 wrote them: 3.4 stamps milliseconds, 3.5 microseconds.
const ETCD_34 = [
  '{"level":"info","ts":"2026-12-02T21:30:00.480Z","msg":"starting an etcd server"}',
  '{"level":"info","ts":"2026-12-02T21:30:00.502Z","msg":"receiving database snapshot","incoming-snapshot-index":24421}',
  '{"level":"info","ts":"2026-12-02T21:30:00.745Z","msg":"received and saved database snapshot","incoming-snapshot-index":24421,"incoming-snapshot-size-bytes":150503424}',
  '{"level":"info","ts":"2026-12-02T21:30:00.845Z","msg":"applied snapshot"}',
  '{"level":"warn","ts":"2026-12-02T21:30:07.490Z","msg":"failed to publish local member to cluster through raft","publish-timeout":"7s"}',
  '{"level":"info","ts":"2026-12-02T21:30:07.491Z","msg":"published local member to cluster through raft","publish-timeout":"7s"}',
].join('\n');

const ETCD_35 = [
  'not json: a stray stderr line',
  '{"level":"info","ts":"2026-12-02T21:27:35.506875Z","msg":"starting an etcd server"}',
  '{"level":"info","ts":"2026-12-02T21:27:35.548695Z","msg":"receiving database snapshot","incoming-snapshot-index":24421}',
  '{"level":"info","ts":"2026-12-02T21:27:35.791291Z","msg":"received and saved database snapshot","incoming-snapshot-index":24421,"incoming-snapshot-size-bytes":150503424}',
  '{"level":"info","ts":"2026-12-02T21:27:35.878739Z","msg":"applied snapshot"}',
  '{"level":"info","ts":"2026-12-02T21:27:35.912000Z","msg":"published local member to cluster through raft","publish-timeout":"7s"}',
  // A later snapshot (the member fell behind again) must not overwrite the first catch-up.
  '{"level":"info","ts":"2026-12-02T21:29:00.000000Z","msg":"receiving database snapshot","incoming-snapshot-index":50000}',
].join('\n');

describe('learner snapshot catch-up read from the etcd log', () => {
  test('3.4: transfer, apply and data catch-up timed from the log; the timed-out first publish is seen', () => {
    const started = Date.parse('2026-12-02T21:30:00.470Z');
    assert.deepEqual(learnerSnapshotFromLog(ETCD_34, started), {
      bytes: 150503424,
      receiveSeconds: 0.243,
      applySeconds: 0.1,
      appliedAfterSeconds: 0.375,
      publishTimedOut: true,
    });
  });

  test('3.5: microsecond stamps, stray lines skipped, the first snapshot counts, a publish that went through', () => {
    const started = Date.parse('2026-12-02T21:27:35.500Z');
    assert.deepEqual(learnerSnapshotFromLog(ETCD_35, started), {
      bytes: 150503424,
      receiveSeconds: 0.243,
      applySeconds: 0.087,
      appliedAfterSeconds: 0.378, // stamps are read to the millisecond
      publishTimedOut: false,
    });
  });

  test('a learner that replayed the log, or whose snapshot never finished, has no snapshot figures', () => {
    const replayed = '{"level":"info","ts":"2026-12-02T21:30:00.480Z","msg":"starting an etcd server"}';
    assert.equal(learnerSnapshotFromLog(replayed, 0), null);
    const unfinished = ETCD_34.split('\n').slice(0, 2).join('\n');
    assert.equal(learnerSnapshotFromLog(unfinished, 0), null);
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ControlPlaneStatusSchema } from '../../src/api/control-plane-status.ts';
import { INVALID_SPEC_REASON, objectStatus, sameStatus } from '../../src/controller/object-status.ts';
import { rollingOut } from '../support/status-document.ts';

// The status subresource of a ControlPlane object, mapped from the document `fastplane status` prints.

const NOW = Date.parse('2026-12-07T10:00:00.000Z');

describe('objectStatus', () => {
  test('maps the status document: the same conditions and reasons, each with the observed generation, and v1beta2 counters', () => {
    const status = objectStatus({ generation: 7, document: rollingOut(), previous: undefined, now: NOW });
    assert.equal(status.observedGeneration, 7);
    assert.deepEqual(
      [status.replicas, status.readyReplicas, status.upToDateReplicas, status.voters, status.learners, status.version],
      [4, 2, 2, 3, 1, '3.5.30'],
      'replicas counts machines whatever their state; version is the lowest a machine runs',
    );
    assert.deepEqual(status.conditions, [
      { type: 'Available', status: 'True', reason: 'QuorumHealthy', message: '3 healthy voters, quorum 2', lastTransitionTime: '2026-12-07T09:10:00Z', observedGeneration: 7 },
      { type: 'RollingOut', status: 'True', reason: 'RollingOut', message: 'RollingOut in progress', lastTransitionTime: '2026-12-07T09:50:00Z', observedGeneration: 7 },
      { type: 'ScalingUp', status: 'False', reason: 'NotScalingUp', message: '', lastTransitionTime: '2026-12-07T09:10:00Z', observedGeneration: 7 },
    ]);
    assert.ok(ControlPlaneStatusSchema.safeParse(status).success, 'the CRD status schema accepts it');
  });

  test('a refused spec is Available False with reason InvalidSpec and the CLI words, beside the running cluster conditions', () => {
    const words = ['etcd 3.9.1 is not installed (found: 3.5.30, 3.6.17)'];
    const status = objectStatus({ generation: 8, document: rollingOut(), invalid: words, previous: undefined, now: NOW });
    const available = status.conditions?.find((c) => c.type === 'Available');
    assert.deepEqual(available, { type: 'Available', status: 'False', reason: INVALID_SPEC_REASON, message: words[0], lastTransitionTime: '2026-12-07T10:00:00Z', observedGeneration: 8 });
    assert.equal(status.conditions?.find((c) => c.type === 'RollingOut')?.status, 'True');
    const fresh = objectStatus({ generation: 1, document: undefined, invalid: words, previous: undefined, now: NOW });
    assert.deepEqual(fresh, { observedGeneration: 1, conditions: [{ type: 'Available', status: 'False', reason: INVALID_SPEC_REASON, message: words[0], lastTransitionTime: '2026-12-07T10:00:00Z', observedGeneration: 1 }] });
  });

  test('a condition keeps its lastTransitionTime while its status holds, and takes a new one when it changes', () => {
    const words = ['spec.version: cannot skip a minor'];
    const first = objectStatus({ generation: 2, document: undefined, invalid: words, previous: undefined, now: NOW });
    const later = objectStatus({ generation: 2, document: undefined, invalid: words, previous: first.conditions, now: NOW + 60_000 });
    assert.ok(sameStatus(first, later), 'nothing changed, so nothing is written');
    const fixed = objectStatus({ generation: 3, document: rollingOut(), previous: later.conditions, now: NOW + 120_000 });
    assert.equal(fixed.conditions?.find((c) => c.type === 'Available')?.lastTransitionTime, '2026-12-07T09:10:00Z', 'True now: the time the document gives');
    assert.ok(!sameStatus(later, fixed));
    assert.ok(!sameStatus(undefined, fixed), 'no status written yet: write it');
  });

  test('a teardown in progress is Deleting True with what is being done', () => {
    const status = objectStatus({ generation: 5, document: rollingOut(), deleting: 'tearing down 4 machines', previous: undefined, now: NOW });
    assert.deepEqual(status.conditions?.[0], { type: 'Deleting', status: 'True', reason: 'Deleting', message: 'tearing down 4 machines', lastTransitionTime: '2026-12-07T10:00:00Z', observedGeneration: 5 });
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { describeLoss, describePlan, type RecoveryPlan } from '../../src/dr/recover.ts';
import { planFromView } from '../../src/planner/plan.ts';
import { buildView } from '../../src/planner/view.ts';
import { observationWrites } from '../../src/reconciler/record.ts';
import { healthyCluster, NOW, observed, spec, voter } from '../support/observed.ts';

const survivor = { machine: 't-1', memberId: '11', clientURL: 'https://127.0.0.1:2379', raftIndex: 900, revision: 450 };
const recovery = (highestRaftIndex?: number): RecoveryPlan => ({
  cluster: 't',
  survivors: [survivor],
  chosen: survivor,
  deleted: ['t-2', 't-3'],
  replicas: 3,
  ...(highestRaftIndex === undefined ? {} : { highestRaftIndex }),
});

describe('recover: what may be lost', () => {
  test('the gap between the highest raft index ever observed and the survivor is reported; none when caught up', () => {
    assert.match(describeLoss(recovery(1000)), /^up to 100 raft entries may be lost: survivor t-1 is at raft index 900, the highest ever observed was 1000$/);
    assert.match(describeLoss(recovery(900)), /^nothing observed was lost/);
    assert.match(describeLoss(recovery()), /cannot tell what was lost/);
    const lines = describePlan(recovery(900));
    assert.ok(lines.includes('  t-1  member 11  raft index 900  revision 450'));
    assert.ok(lines.some((l) => l.includes('delete t-2, t-3')));
  });

  test('a reconcile pass records the highest raft index it observes, and never lowers it', () => {
    const { machines } = healthyCluster(3);
    const o = observed({ machines, members: [voter('t-1', { raftIndex: 500, leader: '1' }), voter('t-2', { raftIndex: 700 }), voter('t-3', { raftIndex: 600 })] });
    const view = buildView(spec(), o, NOW);
    const patches = (highestRaftIndex: number | undefined): unknown[] =>
      observationWrites(view, planFromView(view), { initializedAt: NOW - 1000, highestRaftIndex })
        .writes.flatMap((w) => (w.kind === 'PatchControlPlane' && w.patch.highestRaftIndex !== undefined ? [w.patch.highestRaftIndex] : []));
    assert.deepEqual(patches(undefined), [700]);
    assert.deepEqual(patches(650), [700]);
    assert.deepEqual(patches(800), []);
  });
});

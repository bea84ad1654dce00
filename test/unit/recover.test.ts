import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { describeLoss, describePlan, rankSurvivors, type RecoveryPlan, type SurvivorReading } from '../../src/care/recover.ts';
import { planFromView } from '../../src/planner/plan.ts';
import { buildView } from '../../src/planner/view.ts';
import { observationWrites } from '../../src/reconciler/record.ts';
import { healthyCluster, NOW, observed, spec, voter } from '../support/observed.ts';

const survivor: SurvivorReading = { machine: 't-1', memberId: '11', clientURL: 'https://127.0.0.1:2379', raftIndex: 900, source: 'data dir', running: true, learner: false };
const recovery = (highestRaftIndex?: number): RecoveryPlan => ({
  cluster: 't',
  survivors: [survivor],
  unread: [],
  unreachable: [],
  chosen: survivor,
  restart: [],
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
    assert.ok(lines.includes('  t-1  member 11  committed index 900 (data dir)  running'));
    assert.ok(lines.includes('chosen: t-1 at committed index 900, the only voter with a reading'));
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

describe('recover: which survivor', () => {
  const reading = (machine: string, raftIndex: number, opts: Partial<SurvivorReading> = {}): SurvivorReading => ({ machine, clientURL: `https://${machine}:2379`, raftIndex, source: 'data dir', running: false, learner: false, ...opts });

  test('the highest committed index wins, a stopped member over a lagging one that still runs; the dry run names it and why', () => {
    const { ranked, chosen } = rankSurvivors([reading('t-3', 40, { running: true }), reading('t-1', 560), reading('t-2', 558)]);
    assert.equal(chosen?.machine, 't-1');
    assert.deepEqual(ranked.map((r) => r.machine), ['t-1', 't-2', 't-3']);
    const lines = describePlan({ cluster: 't', survivors: ranked, unreachable: [], unread: ['t-4'], chosen: ranked[0] ?? reading('x', 0), restart: [], deleted: ['t-2', 't-3', 't-4'], replicas: 3 });
    assert.ok(lines.includes('  t-1  member unknown  committed index 560 (data dir)  stopped'));
    assert.ok(lines.includes('  t-3  member unknown  committed index 40 (data dir)  running'));
    assert.ok(lines.includes('  not read (no data dir here, no answer): t-4'));
    assert.ok(lines.includes('chosen: t-1 at committed index 560, the highest committed index of the voters (t-2 558, t-3 40)'));
  });

  test('a learner is never chosen, even ahead of every voter; learners alone give no choice', () => {
    const { chosen, ranked } = rankSurvivors([reading('t-4', 900, { learner: true, running: true }), reading('t-2', 500)]);
    assert.equal(chosen?.machine, 't-2');
    assert.deepEqual(ranked.map((r) => r.machine), ['t-2', 't-4']);
    const lines = describePlan({ cluster: 't', survivors: ranked, unread: [], unreachable: [], chosen: ranked[0] ?? reading('x', 0), restart: [], deleted: ['t-4'], replicas: 3 });
    assert.ok(lines.includes('  t-4  member unknown  committed index 900 (data dir)  running, learner: never chosen'));
    assert.equal(rankSurvivors([reading('t-4', 900, { learner: true })]).chosen, undefined);
  });

  test('with a quorum of intact voters the plan restarts the stopped ones first and forces only if quorum does not come back', () => {
    const { ranked } = rankSurvivors([reading('t-3', 40, { running: true }), reading('t-1', 560), reading('t-2', 558)]);
    const lines = describePlan({ cluster: 't', survivors: ranked, unread: [], unreachable: [], chosen: ranked[0] ?? reading('x', 0), restart: ['t-1', 't-2'], deleted: ['t-2', 't-3'], replicas: 3 });
    assert.ok(lines.includes('chosen: t-1 at committed index 560, the highest committed index of the voters (t-2 558, t-3 40)'));
    assert.ok(lines.some((l) => /^ {2}1\. restart t-1, t-2 from their data dirs as they were: .*nothing is forced or lost$/.test(l)), lines.join('\n'));
    assert.ok(lines.some((l) => /^ {2}3\. restart t-1 once with --force-new-cluster/.test(l)), lines.join('\n'));
  });

  test('on equal indexes a running member is preferred, then the older machine', () => {
    assert.equal(rankSurvivors([reading('t-1', 700), reading('t-2', 700, { running: true })]).chosen?.machine, 't-2');
    assert.equal(rankSurvivors([reading('t-10', 700), reading('t-9', 700)]).chosen?.machine, 't-9');
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { decide, machinesOf, waitCodes } from '../support/decision.ts';
import { planFromView } from '../../src/planner/plan.ts';
import { buildView } from '../../src/planner/view.ts';
import { observationWrites } from '../../src/reconciler/record.ts';
import { healthyCluster, learner, machine, memberIdOf, NOW, observed, spec, voter } from '../support/observed.ts';

// Repair (src/planner/repair.ts): learners added but never started, orphan members, stuck or exited learners.

describe('planner: repair', () => {
  test('starts an added-but-unstarted learner with StartMember', () => {
    const c = healthyCluster(2);
    const o = observed({
      machines: [...c.machines, machine('t-3', { phase: 'Joining', memberRunning: false, memberStartedAt: null })],
      members: [...c.members, learner('t-3', { unstarted: true })],
    });
    const d = decide(o);
    assert.deepEqual(d.membershipAction, {
      kind: 'StartMember',
      machine: 't-3',
      memberId: memberIdOf('t-3'),
      initialClusterState: 'existing',
      reason: 'StartAddedLearner',
    });
    assert.deepEqual(d.machineActions, []);
    assert.equal(d.phases['t-3'], 'Joining');
  });

  test('removes an orphan learner (member without machine)', () => {
    const c = healthyCluster(3);
    const orphan = learner('t-9', { id: '9000000000000000009', peerURL: 'http://127.77.1.9:2380' });
    const d = decide(observed({ ...c, members: [...c.members, orphan] }));
    assert.deepEqual(d.membershipAction, { kind: 'RemoveMember', memberId: '9000000000000000009', peerURL: 'http://127.77.1.9:2380', reason: 'RemoveOrphanLearner' });
    assert.deepEqual(d.machineActions, []);
    assert.equal(d.converged, false);
  });

  test('removes an orphan voter while the projected quorum allows it', () => {
    const c = healthyCluster(3);
    const orphan = voter('t-9', { statusError: 'connection refused' });
    const d = decide(observed({ ...c, members: [...c.members, orphan] }));
    assert.deepEqual(d.membershipAction, { kind: 'RemoveMember', memberId: memberIdOf('t-9'), peerURL: 'http://127.77.1.9:2380', reason: 'RemoveOrphanMember' });

    // One healthy voter and two dead orphans: 1 healthy of 3 is no quorum, so nothing may change.
    const c1 = healthyCluster(1);
    const lost = decide(observed({ ...c1, members: [...c1.members, voter('t-8', { statusError: 'x' }), voter('t-9', { statusError: 'x' })] }), spec({ replicas: 1 }));
    assert.equal(lost.membershipAction, undefined);
    assert.equal(lost.blocked?.code, 'QuorumLost');
  });

  test('marks a learner whose process exited as failed and removes it', () => {
    const c = healthyCluster(2);
    const o = observed({
      machines: [...c.machines, machine('t-3', { phase: 'Learner', memberRunning: false, memberStartedAt: NOW - 5000 })],
      members: [...c.members, learner('t-3', { statusError: 'connection refused' })],
    });
    const d = decide(o);
    assert.deepEqual(
      d.machineActions.filter((a) => a.kind === 'MarkMachineFailed'),
      [{ kind: 'MarkMachineFailed', machine: 't-3', reason: 'LearnerExited', message: 'the learner process exited before promotion' }],
    );
    assert.deepEqual(d.membershipAction, {
      kind: 'RemoveMember',
      memberId: memberIdOf('t-3'),
      peerURL: 'http://127.77.1.3:2380',
      machine: 't-3',
      reason: 'RemoveFailedLearner',
    });
    assert.deepEqual(machinesOf(d, 'CreateMachine'), ['t-4'], 'replaced at once');
    assert.deepEqual(machinesOf(d, 'DeleteMachine'), [], 'not deleted while its member exists');
    assert.equal(d.phases['t-3'], 'Failed');
  });

  test('marks a learner with no progress for learnerStuckAfter as failed', () => {
    const cases: { name: string; progressAt: number; stuck: boolean }[] = [
      { name: 'exactly learnerStuckAfter (2m) without progress', progressAt: NOW - 120_000, stuck: true },
      { name: 'well past it', progressAt: NOW - 600_000, stuck: true },
      { name: '1 ms short of it', progressAt: NOW - 119_999, stuck: false },
    ];
    for (const c of cases) {
      const base = healthyCluster(2);
      const o = observed({
        machines: [...base.machines, machine('t-3', { phase: 'Learner', memberStartedAt: NOW - 900_000, learnerProgress: { appliedIndex: 800, at: c.progressAt } })],
        members: [...base.members, learner('t-3', { raftAppliedIndex: 800 })],
      });
      const d = decide(o);
      if (c.stuck) {
        const mark = d.machineActions.find((a) => a.kind === 'MarkMachineFailed');
        assert.equal(mark?.machine, 't-3', c.name);
        assert.equal(mark.reason, 'LearnerStuck', c.name);
        assert.equal(d.membershipAction?.kind, 'RemoveMember', c.name);
      } else {
        assert.deepEqual(machinesOf(d, 'MarkMachineFailed'), [], c.name);
        assert.deepEqual(waitCodes(d), ['LearnerCatchingUp'], c.name);
      }
    }
    // Shorter deadline from the spec applies.
    const base = healthyCluster(2);
    const o = observed({
      machines: [...base.machines, machine('t-3', { phase: 'Learner', memberStartedAt: NOW - 31_000 })],
      members: [...base.members, learner('t-3', { raftAppliedIndex: 5 })],
    });
    assert.deepEqual(machinesOf(decide(o, spec({ remediation: { learnerStuckAfterMs: 30_000 } })), 'MarkMachineFailed'), ['t-3']);
    assert.deepEqual(machinesOf(decide(o), 'MarkMachineFailed'), []);
  });

  test('a caught-up learner on an idle cluster is promoted, not marked stuck', () => {
    // On an idle cluster the applied index stops moving once the learner has caught up; that is done,
    // not stuck (DESIGN: a learner that "stops progressing" toward the leader is stuck).
    const c = healthyCluster(2);
    const o = observed({
      machines: [...c.machines, machine('t-3', { phase: 'Learner', memberStartedAt: NOW - 200_000, learnerProgress: { appliedIndex: 1350, at: NOW - 180_000 } })],
      members: [...c.members, learner('t-3', { raftAppliedIndex: 1350 })],
    });
    const d = decide(o);
    assert.deepEqual(machinesOf(d, 'MarkMachineFailed'), []);
    assert.equal(d.membershipAction?.kind, 'PromoteLearner');
  });

  test('a learner is judged by its progress over the passes: a snapshot arriving slowly past learnerStuckAfter is not stuck, a silent learner is', () => {
    // Passes 10 s apart for three times learnerStuckAfter (2 m). The learner answers nothing while its
    // snapshot arrives (etcd serves clients only once it has caught up); what shows is its data dir.
    const passes = (bytesAt: (t: number) => number): string | undefined => {
      const base = healthyCluster(2);
      const startedAt = NOW;
      let record = machine('t-3', { phase: 'Learner', memberStartedAt: startedAt }).record;
      for (let t = 0; t <= 360_000; t += 10_000) {
        const t3 = machine('t-3', { phase: 'Learner', memberStartedAt: startedAt, memberDataBytes: bytesAt(t) });
        const o = observed({ machines: [...base.machines, { ...t3, record }], members: [...base.members, learner('t-3', { statusError: 'context deadline exceeded' })] });
        const view = buildView(spec(), o, NOW + t);
        const decision = planFromView(view);
        const mark = decision.machineActions.find((a) => a.kind === 'MarkMachineFailed' && a.machine === 't-3');
        if (mark) return `${mark.kind === 'MarkMachineFailed' ? mark.reason : ''} at ${String(t)}`;
        const patch = observationWrites(view, decision, {}).writes.find((w) => w.kind === 'PatchMachine' && w.name === 't-3');
        if (patch?.kind === 'PatchMachine') record = { ...record, ...patch.set };
      }
      return undefined;
    };
    // 64 KiB every 10 s: a 400 MB snapshot shared by several learners over a slow uplink.
    assert.equal(passes((t) => 70_000_000 + (t / 10_000) * 65_536), undefined, 'a learner whose data dir grows is never stuck');
    assert.equal(passes(() => 70_000_000), 'LearnerStuck at 120000', 'a learner whose data dir stays as it was is stuck after learnerStuckAfter');
    // Growth that stops: stuck learnerStuckAfter after the last growth.
    assert.equal(passes((t) => 70_000_000 + Math.min(t, 100_000)), 'LearnerStuck at 220000');
  });
});

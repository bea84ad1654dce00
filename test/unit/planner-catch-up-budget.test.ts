import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { LearnerReceive } from '../../src/domain/machine.ts';
import { PACED_ABOVE_DB_BYTES } from '../../src/planner/catch-up-budget.ts';
import type { ObservedMachine, ObservedMember, PlannerSpec } from '../../src/planner/types.ts';
import { decide, waitCodes, waitOf } from '../support/decision.ts';
import { healthyCluster, learner, machine, NOW, observed, spec, voter } from '../support/observed.ts';
import { runCatchUps } from '../support/catch-up-lab.ts';

// With maxLearners auto, the join gate starts another catch-up only as far as the leader's measured
// uplink feeds it (src/planner/catch-up-budget.ts); a number is followed as set.

const MB = 1_000_000;
const VERSION = '3.6.17';

/** 3 voters running --max-learners 8, the learners given, and t-6 provisioned, waiting to join. */
function cluster(learners: { name: string; receive?: LearnerReceive; lastGrewAgo?: number; answers?: boolean }[]): { machines: ObservedMachine[]; members: ObservedMember[] } {
  const c = healthyCluster(3, { version: VERSION, maxLearners: 8 });
  const voters = c.members.map((m) => voter(m.name, { version: VERSION, dbSize: 200 * MB }));
  const machines = learners.map((l) =>
    machine(l.name, { phase: 'Joining', version: VERSION, maxLearners: 8, memberDataBytes: 200 * MB, learnerProgress: { dataBytes: 200 * MB, at: NOW - (l.lastGrewAgo ?? 100), ...(l.receive ? { receive: l.receive } : {}) } }),
  );
  const members = learners.map((l) => learner(l.name, l.answers === true ? { raftAppliedIndex: 1000, version: VERSION } : { statusError: 'context deadline exceeded', version: VERSION }));
  return { machines: [...c.machines, ...machines, machine('t-6', { version: VERSION, maxLearners: 8 })], members: [...voters, ...members] };
}

const auto = spec({ replicas: 6, version: VERSION, maxLearners: 8, paceCatchUps: true });
const asSet = spec({ replicas: 6, version: VERSION, maxLearners: 8, paceCatchUps: false });

/** t-4 received 12.3 MB/s alone; since t-5 began (at NOW - 3000) it receives `latest` bytes per second. */
function twoReceiving(latest: number): ReturnType<typeof cluster> {
  return cluster([
    { name: 't-4', receive: { from: { bytes: 150 * MB, at: NOW - 300 }, since: NOW - 6000, latest: { bytesPerSecond: latest, from: NOW - 1500 }, peak: 12.3 * MB } },
    { name: 't-5', receive: { from: { bytes: 90 * MB, at: NOW - 300 }, since: NOW - 3000, latest: { bytesPerSecond: 6 * MB, from: NOW - 1500 } } },
  ]);
}

function add(s: PlannerSpec, c: ReturnType<typeof cluster>): string | undefined {
  const action = decide(observed(c), s).membershipAction;
  return action?.kind === 'AddLearner' ? action.machine : undefined;
}

describe('planner: catch-ups paced by the leader\'s measured uplink (maxLearners auto)', () => {
  test('a learner slowed to half its peak since the next began: the leader\'s uplink is shared, and the next waits, saying so', () => {
    const d = decide(observed(twoReceiving(5.9 * MB)), auto);
    assert.equal(d.membershipAction, undefined);
    assert.equal(
      waitOf(d, 'LeaderUplinkShared').message,
      "t-6 waits at the join gate: learner t-4 receives 5.9 MB/s, 48% of its peak 12.3 MB/s, while the leader sends 11.9 MB/s to 2 learners: the leader's uplink is shared",
    );
  });

  test('a learner that keeps its rate beside the others is limited on its own side: the next catch-up starts', () => {
    assert.equal(add(auto, twoReceiving(11.8 * MB)), 't-6');
  });

  test('a number is followed as set: the same shared uplink holds nothing', () => {
    assert.equal(add(asSet, twoReceiving(5.9 * MB)), 't-6');
  });

  test('one learner receiving: the next waits until its rate alone is measured, then starts beside it (the probe)', () => {
    const unmeasured = decide(observed(cluster([{ name: 't-4', receive: { from: { bytes: 130 * MB, at: NOW - 400 }, since: NOW - 200 } }])), auto);
    assert.equal(unmeasured.membershipAction, undefined);
    assert.match(waitOf(unmeasured, 'LeaderUplinkMeasuring').message, /t-6 waits at the join gate: learner t-4 receives its snapshot; its rate alone is not measured yet/);
    const measured = cluster([{ name: 't-4', receive: { from: { bytes: 150 * MB, at: NOW - 300 }, since: NOW - 1500, latest: { bytesPerSecond: 12 * MB, from: NOW - 1300 }, peak: 12 * MB } }]);
    assert.equal(add(auto, measured), 't-6');
  });

  test('a leader whose database is small (a Kubernetes bootstrap\'s few MB) paces nothing: the next catch-up starts beside an unmeasured one', () => {
    const c = cluster([{ name: 't-4', receive: { from: { bytes: 130 * MB, at: NOW - 400 }, since: NOW - 200 } }]);
    const small = (dbSize: number): ReturnType<typeof cluster> => ({ machines: c.machines, members: c.members.map((m) => (m.isLearner ? m : voter(m.name, { version: VERSION, dbSize }))) });
    assert.equal(add(auto, small(PACED_ABOVE_DB_BYTES)), 't-6');
    assert.deepEqual(waitCodes(decide(observed(small(PACED_ABOVE_DB_BYTES)), auto)).filter((code) => code.startsWith('LeaderUplink')), []);
    assert.equal(add(auto, small(PACED_ABOVE_DB_BYTES + 1)), undefined, 'one byte more: measured first');
  });

  test('with every learner slot taken the preflight holds the add, and pacing adds no wait of its own', () => {
    const c = cluster([{ name: 't-4', receive: { from: { bytes: 130 * MB, at: NOW - 400 }, since: NOW - 200 } }]);
    const one = { machines: c.machines.map((m) => ({ ...m, record: { ...m.record, maxLearners: 1 } })), members: c.members };
    const d = decide(observed(one), auto);
    assert.equal(d.membershipAction, undefined);
    assert.deepEqual(waitCodes(d).filter((code) => code.startsWith('LeaderUplink')), []);
  });

  test('the oldest learner\'s rate since the newest began is measured before another starts', () => {
    const c = cluster([
      { name: 't-4', receive: { from: { bytes: 150 * MB, at: NOW - 300 }, since: NOW - 6000, latest: { bytesPerSecond: 12 * MB, from: NOW - 1300 }, peak: 12 * MB } },
      { name: 't-5', receive: { from: { bytes: 130 * MB, at: NOW - 800 }, since: NOW - 800 } },
    ]);
    const d = decide(observed(c), auto);
    assert.equal(d.membershipAction, undefined);
    assert.match(waitOf(d, 'LeaderUplinkMeasuring').message, /learner t-4 receives its snapshot; its rate since t-5 began receiving is not measured yet/);
  });

  test('learners not receiving hold nothing: one that answers (its snapshot in), one whose data dir is still', () => {
    const slowed = { from: { bytes: 150 * MB, at: NOW - 300 }, since: NOW - 6000, latest: { bytesPerSecond: 3 * MB, from: NOW - 1500 }, peak: 12 * MB };
    const newer = { from: { bytes: 90 * MB, at: NOW - 300 }, since: NOW - 3000, latest: { bytesPerSecond: 6 * MB, from: NOW - 1500 } };
    assert.equal(add(auto, cluster([{ name: 't-4', receive: slowed, answers: true }, { name: 't-5', receive: newer }])), 't-6', 't-4 answers: t-5 alone receives, measured');
    const still = cluster([
      { name: 't-4', receive: { ...slowed, from: { bytes: 150 * MB, at: NOW - 5000 } }, lastGrewAgo: 5000 },
      { name: 't-5', receive: { ...newer, from: { bytes: 90 * MB, at: NOW - 5000 } }, lastGrewAgo: 5000 },
    ]);
    assert.equal(add(auto, still), 't-6');
    assert.deepEqual(waitCodes(decide(observed(still), auto)).filter((c) => c.startsWith('LeaderUplink')), []);
  });

  test('pass by pass on a simulated lab: a shared 12 MB/s uplink feeds two catch-ups at a time; 12 MB/s learners behind a 100 MB/s uplink all overlap; a number overlaps them all', () => {
    const shared = runCatchUps(auto, { uplinkBytesPerSecond: 12 * MB, learnerBytesPerSecond: 12 * MB, snapshotBytes: 60 * MB });
    assert.equal(shared.mostReceiving, 2, `at most two receive at once (${shared.timeline})`);
    assert.ok(shared.waits.some((w) => /LeaderUplinkShared: t-6 waits at the join gate: learner t-4 receives [\d.]+ MB\/s, \d+% of its peak 12\.0 MB\/s/.test(w)), shared.waits.join('\n'));
    assert.equal(shared.promoted, 3, 'every learner caught up and was promoted');

    const ownSide = runCatchUps(auto, { uplinkBytesPerSecond: 100 * MB, learnerBytesPerSecond: 12 * MB, snapshotBytes: 60 * MB });
    assert.equal(ownSide.mostReceiving, 3, `all three overlap (${ownSide.timeline})`);
    assert.ok(!ownSide.waits.some((w) => w.startsWith('LeaderUplinkShared')), ownSide.waits.join('\n'));

    const fixed = runCatchUps(asSet, { uplinkBytesPerSecond: 12 * MB, learnerBytesPerSecond: 12 * MB, snapshotBytes: 60 * MB });
    assert.equal(fixed.mostReceiving, 3, 'a number is followed as set');
  });
});

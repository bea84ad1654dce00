import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { CARE_FAILPOINTS, FAILPOINTS } from '../../src/executor/failpoints.ts';
import { Simulation } from '../../src/sim/simulate.ts';
import { RUNS } from './arbitraries.ts';
import type { Decision, Observed } from '../../src/planner/types.ts';
import { manifestFor, runScenario, type Scenario, type SpecInput } from './harness.ts';
import { assertConvergedInModel, InvariantChecker, NAME, type Trace } from './invariant-checker.ts';
import { BASE_SPEC as BASE, PROPERTIES, type PropertyName } from './properties.ts';
import type { WorkerReply, WorkerRequest } from './property-worker.ts';

/**
 * The invariants 1-8 of docs/architecture.md, checked on the model with the real planner, executor and reconciler:
 * invariants 1-6 after every pass (against what the controller saw and what the model knows), plan()
 * determinism on every observed snapshot, and convergence against the model once faults stop
 * (harness.ts runs the scenarios, invariant-checker.ts has the checks, arbitraries.ts the generators, properties.ts the properties).
 * FASTPLANE_PROPERTY_RUNS=2000 turns the 200-run properties into a soak.
 *
 * What may legitimately fail to converge, and how it is handled:
 * - Killing a majority of voters loses quorum: fastplane can only start the stopped members again
 *   from their data (it never forces a new cluster). The fault properties never kill a voter when
 *   that would leave fewer running voters than quorum; a separate property kills a majority on
 *   purpose and asserts recovery by restart, or Blocked/QuorumLost when the members cannot start.
 * - An init member that never starts is replaced after learnerStuckAfter (deleted, then its init
 *   abandoned); neverStart faults only hit machines once a cluster exists; the re-pick is pinned below.
 *
 * Two of the four properties run on a worker thread (the second core) while the other two run here:
 * about 38 s on a 2-core machine, a little more with other suites running beside it.
 */

const scenario = (overrides: Partial<Scenario> & { spec: SpecInput }): Scenario => ({ seed: 1, faults: [], crashes: [], changes: [], latencyMs: 0, ...overrides });

type Outcome = { ok: true; summary: string } | { ok: false; message: string };

/** Starts properties on a worker thread at once; each promise resolves (never rejects) with its outcome. */
function inWorker(properties: PropertyName[]): { outcomes: Map<PropertyName, Promise<Outcome>>; stop: () => Promise<number> } {
  const url = new URL('./property-worker.ts', import.meta.url).href;
  const request: WorkerRequest = { properties, runs: RUNS };
  // The worker loads TypeScript through tsx's API, as the test process does through --import tsx.
  const worker = new Worker(`import('tsx/esm/api').then(({ tsImport }) => tsImport(${JSON.stringify(url)}, ${JSON.stringify(import.meta.url)}));`, {
    eval: true,
    execArgv: [],
    workerData: request,
  });
  const settle = new Map<PropertyName, (outcome: Outcome) => void>();
  const outcomes = new Map(properties.map((p) => [p, new Promise<Outcome>((resolve) => settle.set(p, resolve))]));
  const failAll = (message: string): void => {
    for (const resolve of settle.values()) resolve({ ok: false, message });
  };
  worker.on('message', (reply: WorkerReply) => settle.get(reply.property)?.(reply));
  worker.once('error', (error) => { failAll(`worker failed: ${error.message}`); });
  worker.once('exit', (code) => { failAll(`worker exited (${String(code)}) before reporting`); });
  return { outcomes, stop: () => worker.terminate() };
}

async function expectProperty(run: Promise<string> | Promise<Outcome> | undefined): Promise<void> {
  assert.ok(run);
  const outcome = await run;
  if (typeof outcome === 'string') {
    console.log(outcome);
    return;
  }
  if (!outcome.ok) assert.fail(outcome.message);
  console.log(outcome.summary);
}

describe('invariants under random specs, faults and controller crashes', () => {
  // The spec-change and majority properties run on the second core meanwhile.
  const worker = inWorker(['changes', 'majority']);
  after(async () => {
    await worker.stop();
  });

  test(`random specs with provisioning failures, member crashes, members that never start, stalled learners and controller crashes (${String(RUNS)} runs)`, async () => {
    await expectProperty(PROPERTIES.faults(RUNS));
  });

  test(`membership changes racing member crashes and leadership moves a voter has not heard of: they lie in wait for victim choice, leader moves, removals, promotions (${String(RUNS)} runs)`, async () => {
    await expectProperty(PROPERTIES.races(RUNS));
  });

  test(`spec changes mid-run: scale between 1 and 9, upgrade 3.4.23 -> 3.5.16 as a rollout, with faults and crashes (${String(RUNS)} runs, worker thread)`, async () => {
    await expectProperty(worker.outcomes.get('changes'));
  });

  test(`killing a majority of voters: the stopped members are restarted as themselves, or Blocked with QuorumLost if they cannot start (${String(RUNS)} runs, worker thread)`, async () => {
    await expectProperty(worker.outcomes.get('majority'));
  });
});

describe('controller crashes at every failpoint', () => {
  // Systematic rather than random: each failpoint, first and second time it is reached, during a
  // scale up from nothing, a rollout to 3.5.16 and a scale down, with slow provisioning.
  // Care's failpoints are reached on real etcd only (test/e2e/certs-maintain.test.ts kills there).
  for (const failpoint of FAILPOINTS.filter((f) => !CARE_FAILPOINTS.includes(f))) {
    // A cluster is initialised once: its failpoint has no second hit.
    for (const hit of failpoint === 'after-init-record' || failpoint === 'after-init-start' ? [1] : [1, 2]) {
      test(`${failpoint} (hit ${String(hit)}): the restarted controller converges and every invariant holds`, async () => {
        const spec: SpecInput = { ...BASE, replicas: 3, provisioning: { minMs: 5_000, maxMs: 20_000 } };
        const { result, sim } = await runScenario(
          scenario({
            seed: hit,
            spec,
            crashes: [{ failpoint, hit }],
            changes: [
              { atMs: 60_000, replicas: 5, upgrade: true },
              { atMs: 200_000, replicas: 3, upgrade: false },
            ],
          }),
        );
        assert.equal(result.outcome, 'Converged');
        assert.equal(sim.crashes, 1, 'the controller crashed there');
      });
    }
  }
});

describe('regressions: a stalled learner during a scale down', () => {
  test('scale 3 -> 1 while the joining learner is stalled (serial): the learner leaves, not the last voter', async () => {
    // Found by the spec-change property. Victim selection ranked the stalled learner like a healthy
    // voter and took the oldest machine, the only voter, which can never leave (LastVoter). Once the
    // learner was remediated, serial waited for the leaving member before creating a new one: deadlock.
    const { sim } = await runScenario(
      scenario({
        spec: { ...BASE, strategy: 'serial', maxSurge: 0 },
        faults: [{ atMs: 0, kind: 'stallLearner', pick: 0 }],
        changes: [{ atMs: 1501, replicas: 1, upgrade: false }],
      }),
    );
    const chosen = sim.store.inspect(NAME).events.filter((e) => e.action === 'RequestMachineDeletion').map((e) => e.machine);
    assert.deepEqual(chosen, ['prop-2'], 'the learner is the victim, the voter stays');
    assert.deepEqual(sim.world.snapshot(NAME).machines.map((m) => m.name), ['prop-1']);
  });

  test('scale 1 -> 5 -> 1 with a stalled learner (serial)', async () => {
    await runScenario(
      scenario({
        spec: { ...BASE, replicas: 1, strategy: 'serial', maxSurge: 0 },
        faults: [{ atMs: 0, kind: 'stallLearner', pick: 0 }],
        changes: [
          { atMs: 0, replicas: 5, upgrade: false },
          { atMs: 1501, replicas: 1, upgrade: false },
        ],
      }),
    );
  });
});

describe('the leader is known before a removal (invariant 5, judged by the model)', () => {
  test('scale 5 -> 3 right after leadership moved to a victim, while one voter still names the old leader', async () => {
    const sim = new Simulation(manifestFor({ ...BASE, replicas: 5 }), { seed: 1 });
    const trace: Trace = { log: [], passes: 0 };
    const checker = new InvariantChecker(sim, trace);
    const waits = new Set<string>();
    const onPass = (pass: { observed: Observed; decision: Decision; now: number }): void => {
      checker.onPass(pass);
      for (const w of pass.decision.waits) waits.add(w.code);
    };
    assert.equal((await sim.run(600_000, onPass)).outcome, 'Converged');
    const before = sim.world.snapshot(NAME);
    const name = (id: string | undefined): string | undefined => before.members.find((m) => m.id === id)?.machine;
    const oldLeader = name(before.leaderId);
    // Scale down takes the two oldest machines; the new leader is one of them, the laggard stays.
    const [first, second] = before.machines.map((m) => m.name);
    assert.ok(first !== undefined && second !== undefined && oldLeader !== undefined);
    const newLeader = oldLeader === first ? second : first;
    const laggard = before.machines.map((m) => m.name).find((n) => n !== first && n !== second && n !== newLeader);
    assert.ok(laggard !== undefined);
    // Longer than the 5 s peer-connection rule that may hold the first removal after the scale-up.
    sim.world.transferLeadership(newLeader, laggard, 20_000);
    assert.equal(name(sim.world.snapshot(NAME).leaderId), newLeader);
    // The model forgives a removal of a leader that took over at the very instant (the controller may
    // have observed just before); this one has led for a second.
    await sim.clock.sleep(1000);
    await sim.apply(manifestFor({ ...BASE, replicas: 3 }));
    assert.equal((await sim.run(600_000, onPass)).outcome, 'Converged');
    checker.checkWorld();
    assert.ok(waits.has('LeaderUnknown'), `the removals waited for the voters to agree (waits seen: ${[...waits].join(', ')})`);
    const moves = sim.store.inspect(NAME).events.filter((e) => e.action === 'MoveLeader');
    assert.ok(moves.length > 0, 'leadership was moved off the victim that leads');
    assertConvergedInModel(sim, 3, BASE.version, trace.log.join(' | '));
  });
});

describe('a single voter crashes (1 replica)', () => {
  test('the init member crashes: the controller restarts it from its data, never bootstraps again', async () => {
    const sim = new Simulation(manifestFor({ ...BASE, replicas: 1 }), { seed: 1 });
    const checker = new InvariantChecker(sim, { log: [], passes: 0 });
    const onPass = checker.onPass.bind(checker);
    assert.equal((await sim.run(600_000, onPass)).outcome, 'Converged');
    sim.world.killMember('prop-1');
    assert.equal((await sim.run(600_000, onPass)).outcome, 'Converged');
    assert.equal(sim.world.initCount, 1);
    checker.checkWorld();
    assertConvergedInModel(sim, 1, '3.4.23', 'after the restart');
  });
});

describe('regressions: serial deadlock when the last voter is leaving', () => {
  test('7 -> 1 (serial), the staying voter crashes right after the victims are chosen', async () => {
    // Found by the race property after the first fix. Victims prop-1..6 were chosen to leave; then
    // prop-7, the one to stay, crashed and was remediated. prop-1 ended as the last voter, leaving, and
    // serial waited for it to leave before creating its replacement; it could only leave after one.
    await runScenario(
      scenario({
        spec: { ...BASE, replicas: 7, strategy: 'serial', maxSurge: 0, provisioning: { minMs: 0, maxMs: 2000 }, learnerStuckAfterMs: 30_000 },
        faults: [{ atMs: 60_000, kind: 'killMember', pick: 6, trigger: 'RequestMachineDeletion' }],
        changes: [{ atMs: 60_000, replicas: 1, upgrade: false }],
      }),
    );
  });
});

describe('quorum lost, and what cannot be recovered', () => {
  test('the only voter crashes and it is not the init machine (after a rollout): it is started again from its data dir', async () => {
    // Quorum is lost (1 of 1 down) and no member answers. The voter is another machine than the init
    // one after the rollout; it restarts as itself: no second bootstrap, no member removed or added.
    const spec = { ...BASE, replicas: 1 };
    const sim = new Simulation(manifestFor(spec), { seed: 1 });
    const checker = new InvariantChecker(sim, { log: [], passes: 0 });
    const onPass = checker.onPass.bind(checker);
    await sim.run(600_000, onPass);
    await sim.apply(manifestFor({ ...spec, version: '3.5.16' }));
    assert.equal((await sim.run(600_000, onPass)).outcome, 'Converged');
    const [voter] = sim.world.snapshot(NAME).members;
    assert.equal(voter?.machine, 'prop-2');
    sim.world.killMember('prop-2');
    const eventsBefore = sim.store.inspect(NAME).events.length;
    const result = await sim.run(300_000, onPass);
    assert.equal(result.outcome, 'Converged');
    const actions = sim.store.inspect(NAME).events.slice(eventsBefore).flatMap((e) => (e.action === undefined ? [] : [`${e.action} ${e.machine ?? ''}`]));
    assert.deepEqual([...new Set(actions)], ['RestartMember prop-2']);
    assert.deepEqual(sim.world.snapshot(NAME).members.map((m) => m.id), [voter.id], 'the same member is back');
    assert.equal(sim.world.initCount, 1);
    checker.checkWorld();
  });

  test('an init member that never starts is deleted, its init abandoned, and another machine initializes: one bootstrap, converged', async () => {
    // Invariant 1 holds across the re-pick: the abandoned init machine is deleted (with its data dir)
    // before AbandonInit, and only then is the next InitCluster recorded.
    const sim = new Simulation(manifestFor({ ...BASE, provisioning: { minMs: 10_000, maxMs: 10_000 } }), { seed: 3 });
    const trace: Trace = { log: [], passes: 0 };
    const checker = new InvariantChecker(sim, trace);
    let first: string | undefined;
    const result = await sim.run(600_000, (pass) => {
      checker.onPass(pass);
      // The first machine picked to initialize never starts its member.
      const action = pass.decision.membershipAction;
      if (first === undefined && action?.kind === 'InitCluster') {
        first = action.machine;
        sim.world.neverStart(first);
      }
    });
    assert.equal(result.outcome, 'Converged');
    assert.equal(sim.world.initCount, 1);
    checker.checkWorld();
    const { controlPlane, events } = sim.store.inspect(NAME);
    assert.ok(controlPlane);
    assert.deepEqual(controlPlane.abandonedInits, [first]);
    assert.notEqual(controlPlane.initMachine, first);
    assert.ok(first !== undefined);
    const seq = (action: string, machine?: string): number => events.findIndex((e) => e.action === action && e.outcome === 'Succeeded' && (machine === undefined || e.machine === machine));
    const deleted = seq('DeleteMachine', first);
    assert.ok(deleted >= 0 && deleted < seq('AbandonInit', first), 'the init machine is deleted before its init is abandoned');
    assert.ok(seq('AbandonInit', first) < seq('InitCluster', controlPlane.initMachine), 'the new init is recorded after the abandon');
    assertConvergedInModel(sim, 3, BASE.version, 'after the init re-pick');
  });
});

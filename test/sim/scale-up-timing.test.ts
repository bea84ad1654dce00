import assert from 'node:assert/strict';
import { test } from 'node:test';
import { validateControlPlane } from '../../src/api/control-plane.ts';
import { REQUEUE } from '../../src/planner/requeue.ts';
import { compareStrategies, percentile, timeToReady } from '../../src/sim/compare.ts';
import { MEASURED_TIMINGS } from '../../src/sim/model-timings.ts';
import { Simulation } from '../../src/sim/simulate.ts';

/**
 * The evidence for the design's central claim, in virtual time on the model with etcd's measured
 * timings (docs/etcd-behaviour.md): with 30 s provisioning, 0 -> 5 in parallel costs one provisioning plus the
 * membership steps, which etcd serializes (the leader's first election, then the 5 s peer-connection
 * rule between consecutive adds); serial pays provisioning once per machine.
 */

const PROVISIONING_MS = 30_000;
const REPLICAS = 5;
const SEEDS = [1, 2, 3, 4, 5, 6, 7, 8];
const { catchUp, electionMs, peerHealthGateMs } = MEASURED_TIMINGS;
/** The slowest poll of the reconcile loop while it waits (provisioning); every step can lose one. */
const POLL_MS = Math.max(REQUEUE.slow, REQUEUE.retry, REQUEUE.fast);

/** One learner at a time, as etcd 3.4 and 3.5 allow (and KCP does): the gate these bounds describe. */
function manifest(strategy: 'parallel' | 'serial', maxLearners: 'auto' | number = 1) {
  return validateControlPlane({
    apiVersion: 'fastplane.dev/v1alpha1',
    kind: 'ControlPlane',
    metadata: { name: 't' },
    spec: { replicas: REPLICAS, scaleUp: { strategy }, etcd: { maxLearners } },
  });
}

async function measure(strategy: 'parallel' | 'serial'): Promise<number[]> {
  const timings = { provisioning: { minMs: PROVISIONING_MS, maxMs: PROVISIONING_MS } };
  const times: number[] = [];
  for (const seed of SEEDS) {
    const ms = await timeToReady(manifest(strategy), seed, timings, 3_600_000);
    assert.ok(ms !== undefined, `${strategy} seed ${String(seed)} did not converge`);
    times.push(ms);
  }
  return times.sort((a, b) => a - b);
}

const seconds = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

test('0 -> 5: parallel ~ max(provisioning) + init + 3 x 5 s + one join; serial ~ 5 x (provisioning + join)', async () => {
  const parallel = await measure('parallel');
  const serial = await measure('serial');

  // Parallel. No step can start earlier than: every machine provisioned (30 s, at once), the first
  // member elected leader (electionMs) so the first learner can join, then replicas-2 further adds each
  // held by the 5 s rule counted from the previous learner's connection, and the last learner's
  // catch-up before its promotion. Above that bound only polling is lost: at most one poll interval
  // (500 ms) on each of the five membership steps, plus the catch-up draw's spread.
  const parallelFloor = PROVISIONING_MS + electionMs + (REPLICAS - 2) * peerHealthGateMs + catchUp.minMs;
  const parallelBand = REPLICAS * POLL_MS + (catchUp.maxMs - catchUp.minMs);
  // Serial. Each machine is created only once the previous one is a voter: five provisionings in a
  // row, the election after the first, and four catch-ups. The 5 s rule never binds (30 s apart).
  // Each machine can lose a poll before its creation and one before its join.
  const serialFloor = REPLICAS * PROVISIONING_MS + electionMs + (REPLICAS - 1) * catchUp.minMs;
  const serialBand = 2 * REPLICAS * POLL_MS + (REPLICAS - 1) * (catchUp.maxMs - catchUp.minMs);

  const p50Parallel = percentile(parallel, 50);
  const p50Serial = percentile(serial, 50);
  console.log(
    `0 -> ${String(REPLICAS)} with ${seconds(PROVISIONING_MS)} provisioning, ${String(SEEDS.length)} seeds: ` +
      `parallel ${seconds(p50Parallel)} (expected ${seconds(parallelFloor)} .. ${seconds(parallelFloor + parallelBand)}), ` +
      `serial ${seconds(p50Serial)} (expected ${seconds(serialFloor)} .. ${seconds(serialFloor + serialBand)}), ` +
      `speedup x${(p50Serial / p50Parallel).toFixed(2)}`,
  );
  for (const ms of parallel) assert.ok(ms >= parallelFloor && ms <= parallelFloor + parallelBand, `parallel took ${seconds(ms)}`);
  for (const ms of serial) assert.ok(ms >= serialFloor && ms <= serialFloor + serialBand, `serial took ${seconds(ms)}`);
  // The claim in one number: for five machines, parallel is more than three times as fast.
  assert.ok(p50Serial / p50Parallel > 3, `speedup only x${(p50Serial / p50Parallel).toFixed(2)}`);
});

test('compareStrategies: percentiles per strategy, deterministic for a seed', async () => {
  const options = { replicas: 3, provisioning: { minMs: 20_000, maxMs: 40_000 }, runs: 12, seed: 42 };
  const first = await compareStrategies(options);
  const second = await compareStrategies(options);
  assert.deepEqual(first, second, 'the same seed gives the same figures');
  for (const stats of [first.parallel, first.serial]) {
    assert.equal(stats.converged, 12);
    assert.equal(stats.samplesMs.length, 12);
    assert.ok(stats.min <= stats.p50 && stats.p50 <= stats.p90 && stats.p90 <= stats.p99 && stats.p99 <= stats.max);
  }
  // Parallel waits for the slowest of three draws; serial for the sum of three.
  assert.ok(first.parallel.p50 < first.serial.p50);
  assert.ok(first.parallel.max <= options.provisioning.maxMs + electionMs + peerHealthGateMs + 3000);
  assert.ok(first.serial.min >= 3 * options.provisioning.minMs);
  assert.ok(first.speedup > 1.5, `speedup x${first.speedup.toFixed(2)}`);
  const seen: string[] = [];
  await compareStrategies({ ...options, runs: 2, onRun: ({ strategy, index, ms }) => seen.push(`${strategy}${String(index)}:${String(ms !== undefined)}`) });
  assert.deepEqual(seen, ['parallel0:true', 'parallel1:true', 'serial0:true', 'serial1:true']);
});

test('percentile is nearest-rank', () => {
  const samples = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
  assert.equal(percentile(samples, 50), 50);
  assert.equal(percentile(samples, 90), 90);
  assert.equal(percentile(samples, 99), 100);
  assert.equal(percentile([7], 99), 7);
  assert.ok(Number.isNaN(percentile([], 50)));
});

test('fast-forward skips only idle polls: the same seed reaches ready at the same virtual time with and without it', async () => {
  for (const strategy of ['parallel', 'serial'] as const) {
    const manifest = validateControlPlane({
      apiVersion: 'fastplane.dev/v1alpha1',
      kind: 'ControlPlane',
      metadata: { name: 'ff' },
      spec: { replicas: 5, scaleUp: { strategy }, provider: { provisioningDelay: '20s-40s' } },
    });
    for (const seed of [1, 2, 3]) {
      const times: { ms: number; passes: number }[] = [];
      for (const fastForward of [false, true]) {
        const sim = new Simulation(manifest, { seed, fastForward });
        const start = sim.clock.now();
        const result = await sim.run(3_600_000);
        assert.equal(result.outcome, 'Converged');
        times.push({ ms: sim.clock.now() - start, passes: result.passes });
      }
      const [polling, skipping] = times;
      assert.equal(skipping!.ms, polling!.ms, `${strategy} seed ${String(seed)}: same time to ready`);
      assert.ok(skipping!.passes < polling!.passes / 3, `${strategy} seed ${String(seed)}: far fewer passes (${String(skipping!.passes)} vs ${String(polling!.passes)})`);
    }
  }
});

test('0 -> 5 on etcd 3.6 with maxLearners auto: several learners catch up at once, never more than the members run, promotions one at a time', async () => {
  const sim = new Simulation(manifest('parallel', 'auto'), { seed: 3, timings: { provisioning: { minMs: PROVISIONING_MS, maxMs: PROVISIONING_MS } } });
  let most = 0;
  let limit = Number.POSITIVE_INFINITY;
  const result = await sim.run(3_600_000, () => {
    most = Math.max(most, sim.world.learnerCount('t'));
    limit = Math.min(limit, sim.world.learnerLimit('t'));
  });
  assert.equal(result.outcome, 'Converged');
  assert.equal(limit, 8, 'every member runs --max-learners 8 (auto)');
  assert.ok(most >= 2, `learners caught up together (most at once: ${String(most)})`);
  const changes = sim.store.inspect('t').events.filter((e) => e.outcome === 'Succeeded' && (e.action === 'PromoteLearner' || e.action === 'AddLearner'));
  const promotions = changes.filter((e) => e.action === 'PromoteLearner');
  assert.equal(promotions.length, 4);
  for (let i = 1; i < changes.length; i++) assert.ok((changes[i - 1]!.endedAt ?? 0) <= changes[i]!.at, 'membership changes never overlap');
});

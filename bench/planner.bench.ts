/**
 * `npm run bench:planner`: how cheap the controller's thinking is, as JSON on stdout.
 *  - plan() for 3/5/7/9 machines: every observation a 0→N parallel scale-up really produces (captured
 *    from a simulated run), planned again and again; median and p95 microseconds per call. Target < 50 µs.
 *  - simulator reconciles per second: whole 0→5 scale-ups on the model (observe, plan, record, execute
 *    against model etcd on virtual time) back to back; passes / wall seconds on one core (Node runs the
 *    loop on one thread). Target >= 10,000.
 * Figures only, no assertions: a slow CI host must not fail a build over them.
 */
import { defaultControlPlane, type ControlPlane } from '../src/api/control-plane.ts';
import { hostInfo } from '../src/bench/host-info.ts';
import { median } from '../src/bench/stats.ts';
import { plan } from '../src/planner/plan.ts';
import { toPlannerSpec } from '../src/planner/spec.ts';
import type { Observed } from '../src/planner/types.ts';
import { Simulation } from '../src/sim/simulate.ts';

const PLAN_TARGET_MICROS = 50;
const SIM_TARGET_PER_SECOND = 10_000;
/** Calls timed together: one call is a few microseconds, close to the timer's own cost. */
const BATCH = 200;
const ROUNDS = 5;
const SIM_WALL_MS = 3000;

function manifestFor(replicas: number, seedName: string): ControlPlane {
  const base = defaultControlPlane(seedName);
  return { ...base, spec: { ...base.spec, replicas, provider: { ...base.spec.provider, provisioningDelay: '20s-40s' } } };
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

const round = (n: number, digits: number): number => Math.round(n * 10 ** digits) / 10 ** digits;

/** Every observation of one simulated 0→N scale-up, with the time it was planned at. */
async function observationsOf(manifest: ControlPlane): Promise<{ observed: Observed; now: number }[]> {
  const sim = new Simulation(manifest, { seed: 7 });
  const seen: { observed: Observed; now: number }[] = [];
  await sim.run(3_600_000, (pass) => {
    // A deep copy: the benchmark must plan the observation as it was, whatever the loop does next.
    seen.push({ observed: structuredClone(pass.observed), now: pass.now });
  });
  return seen;
}

async function planBench(replicas: number): Promise<Record<string, number | boolean>> {
  const manifest = manifestFor(replicas, `plan-${String(replicas)}`);
  const spec = toPlannerSpec(manifest);
  const observations = await observationsOf(manifest);
  let sink = 0;
  // Warm-up, so the JIT has compiled plan() before anything is timed.
  for (let i = 0; i < 20; i++) for (const o of observations) sink += plan(spec, o.observed, o.now).waits.length;
  const perCall: number[] = [];
  for (let r = 0; r < ROUNDS; r++) {
    for (const o of observations) {
      const started = performance.now();
      for (let i = 0; i < BATCH; i++) sink += plan(spec, o.observed, o.now).waits.length;
      perCall.push(((performance.now() - started) * 1000) / BATCH);
    }
  }
  const medianMicros = median(perCall) ?? NaN;
  return {
    machines: replicas,
    observations: observations.length,
    calls: perCall.length * BATCH,
    medianMicros: round(medianMicros, 2),
    p95Micros: round(percentile(perCall, 95), 2),
    targetMicros: PLAN_TARGET_MICROS,
    meetsTarget: medianMicros < PLAN_TARGET_MICROS,
    // Keeps the calls from being optimised away; not a figure.
    checksum: sink % 1000,
  };
}

async function simulatorBench(replicas: number): Promise<Record<string, number | boolean>> {
  let passes = 0;
  let runs = 0;
  const started = performance.now();
  while (performance.now() - started < SIM_WALL_MS) {
    const sim = new Simulation(manifestFor(replicas, 'sim'), { seed: runs + 1 });
    const result = await sim.run(3_600_000);
    passes += result.passes;
    runs++;
  }
  const wallSeconds = (performance.now() - started) / 1000;
  const perSecond = passes / wallSeconds;
  return {
    replicas,
    runs,
    passes,
    wallSeconds: round(wallSeconds, 3),
    reconcilesPerSecond: Math.round(perSecond),
    target: SIM_TARGET_PER_SECOND,
    meetsTarget: perSecond >= SIM_TARGET_PER_SECOND,
  };
}

const planResults: Record<string, number | boolean>[] = [];
for (const replicas of [3, 5, 7, 9]) planResults.push(await planBench(replicas));
const simulator = await simulatorBench(5);
process.stdout.write(`${JSON.stringify({ kind: 'fastplane-planner-bench', at: new Date().toISOString(), host: hostInfo(), plan: planResults, simulator }, null, 2)}\n`);

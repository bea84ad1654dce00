/**
 * `npm run bench:controller`: the controller's own loop (work queue, leader election, passes) over
 * 10,000 control planes, each 0 -> 3 with 5-15 min provisioning, on the etcd model and a memory store
 * in virtual time; JSON on stdout: wall time, passes (reconciles) per wall second, peak RSS, virtual
 * time to the last convergence. Goal: all converge, < 2 GB RSS, < 10 min.
 *   CONTROLLER_BENCH_CLUSTERS=1000 npm run bench:controller   # a smaller run
 * Figures only, no assertions (a slow host must not fail a build over them).
 */
import { defaultControlPlane, validateControlPlane } from '../src/api/control-plane.ts';
import { MemoryStateStore } from '../src/adapters/stores/memory-state-store.ts';
import { hostInfo } from '../src/bench/host-info.ts';
import { Controller } from '../src/controller/controller.ts';
import type { ControllerMetrics } from '../src/controller/controller-metrics.ts';
import { clockTimers } from '../src/controller/timers.ts';
import { HeapClock } from '../src/sim/heap-clock.ts';
import { ModelEtcdAdmin, ModelProvider } from '../src/sim/model-adapters.ts';
import { MEASURED_TIMINGS } from '../src/sim/model-timings.ts';
import { ModelWorld } from '../src/sim/model-world.ts';
import { seededRandom } from '../src/sim/random.ts';

const CLUSTERS = Number(process.env.CONTROLLER_BENCH_CLUSTERS ?? 10_000);
const REPLICAS = 3;
const PROVISIONING = { minMs: 5 * 60_000, maxMs: 15 * 60_000 };
const MAX_CONCURRENT = 1_000;
/** Long enough that lease renewals (every 2 s at most) are not most of the events. */
const LEASE_TTL_MS = 30_000;
/** Virtual time before the run gives up. */
const VIRTUAL_BOUND_MS = 2 * 60 * 60_000;
/** A cluster the model will not change by itself is only looked at again when its spec changes. */
const IDLE_MS = 60 * 60_000;

const clock = new HeapClock(1_000_000);
const random = seededRandom(1);
const store = new MemoryStateStore({ isHolderAlive: () => true });
/** One model world per control plane: each world's "next change" is then a look at 3 machines. */
const worlds = new Map<string, ModelWorld>();
const worldOf = (cluster: string): ModelWorld => {
  let world = worlds.get(cluster);
  if (!world) {
    world = new ModelWorld(clock, random, { ...MEASURED_TIMINGS, provisioning: PROVISIONING });
    worlds.set(cluster, world);
  }
  return world;
};

let converged = 0;
let lastConvergedAt = 0;
const noop = (): void => undefined;
const metrics: ControllerMetrics = {
  reconcileDuration: noop,
  membershipChange: noop,
  etcdRefusal: noop,
  machines: noop,
  controlPlaneReady: noop,
  timeToReady: () => {
    converged++;
    lastConvergedAt = clock.now();
  },
  leader: noop,
  forget: noop,
};

const controller = new Controller({
  store,
  id: 'bench',
  clock,
  timers: clockTimers(clock),
  maxConcurrentReconciles: MAX_CONCURRENT,
  leaseTtlMs: LEASE_TTL_MS,
  metrics,
  depsFor: (manifest, writer, notify) => {
    const world = worldOf(manifest.metadata.name);
    return Promise.resolve({ cluster: manifest.metadata.name, etcd: new ModelEtcdAdmin(world), provider: new ModelProvider(world), store, writer, clock, failpoint: noop, notify });
  },
  // Polls before the model's next change of that cluster could only repeat the decision: wake at the
  // first poll tick after it, as the same poll loop would first see it.
  requeueDelay: (cluster, ms) => {
    const now = clock.now();
    const next = worlds.get(cluster)?.nextChangeAfter(now);
    if (next === undefined) return ms >= 5_000 ? IDLE_MS : ms;
    if (ms <= 0 || next <= now + ms) return ms;
    return Math.ceil((next - now) / ms) * ms;
  },
});

const started = performance.now();
const virtualStart = clock.now();
const base = defaultControlPlane('cp');
for (let i = 0; i < CLUSTERS; i++) {
  const name = `cp-${String(i).padStart(5, '0')}`;
  await store.applySpec(validateControlPlane({ ...base, metadata: { name }, spec: { ...base.spec, replicas: REPLICAS, provider: { ...base.spec.provider, provisioningDelay: '5m-15m' } } }), clock.now());
}
await controller.start();
while (converged < CLUSTERS && clock.now() - virtualStart < VIRTUAL_BOUND_MS) await clock.sleep(10_000);
const wallMs = performance.now() - started;
await controller.stop(5_000);

const violations = [...worlds.values()].reduce((n, world) => n + world.violations.length, 0);
process.stdout.write(
  `${JSON.stringify(
    {
      benchmark: 'controller',
      clusters: CLUSTERS,
      replicasEach: REPLICAS,
      provisioning: '5m-15m',
      maxConcurrentReconciles: MAX_CONCURRENT,
      converged,
      allConverged: converged === CLUSTERS,
      modelViolations: violations,
      virtualMinutesToLastConvergence: Math.round(((lastConvergedAt - virtualStart) / 60_000) * 10) / 10,
      wallSeconds: Math.round(wallMs / 100) / 10,
      reconciles: controller.passCount,
      reconcilesPerSecond: Math.round(controller.passCount / (wallMs / 1000)),
      timersFired: clock.fired,
      peakRssMB: Math.round(process.resourceUsage().maxRSS / 1024),
      goals: { allConverge: converged === CLUSTERS, rssUnder2GB: process.resourceUsage().maxRSS < 2 * 1024 * 1024, under10Minutes: wallMs < 600_000 },
      host: hostInfo(),
    },
    null,
    2,
  )}\n`,
);

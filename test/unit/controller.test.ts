import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { defaultControlPlane, validateControlPlane, type ControlPlane } from '../../src/api/control-plane.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import { Controller } from '../../src/controller/controller.ts';
import type { ChangeResult, ControllerMetrics } from '../../src/controller/controller-metrics.ts';
import { clockTimers } from '../../src/controller/timers.ts';
import { FencedWriter, RenewDeadlineError } from '../../src/lease/fenced-writer.ts';
import type { Clock } from '../../src/ports/clock.ts';
import { leaseIsFree, type StateStore } from '../../src/ports/state-store.ts';
import { LeaseKeeper, leaseCallBoundMs } from '../../src/lease/lease-keeper.ts';
import { ModelEtcdAdmin, ModelProvider } from '../../src/sim/model-adapters.ts';
import { MEASURED_TIMINGS } from '../../src/sim/model-timings.ts';
import { ModelWorld } from '../../src/sim/model-world.ts';
import { seededRandom } from '../../src/sim/random.ts';
import { VirtualClock } from '../../src/sim/virtual-clock.ts';

const TTL = 3_000;
const SIDE_EFFECTS = new Set(['create', 'startMember', 'stopMember', 'delete', 'addLearner', 'promoteLearner', 'removeMember', 'moveLeader']);

function manifest(name: string, replicas: number, etcd: Partial<ControlPlane['spec']['etcd']> = {}, remediation: Partial<ControlPlane['spec']['remediation']> = {}): ControlPlane {
  const base = defaultControlPlane(name);
  return validateControlPlane({ ...base, spec: { ...base.spec, replicas, etcd: { ...base.spec.etcd, ...etcd }, remediation: { ...base.spec.remediation, ...remediation } } });
}

/** One side effect as the model saw it: who made it, from when to when. */
interface Act {
  replica: string;
  method: string;
  start: number;
  end: number;
}

/** Two (or more) controller replicas over one memory store and one model world, on virtual time. */
class Fleet {
  readonly clock = new VirtualClock(1_000_000);
  readonly world = new ModelWorld(this.clock, seededRandom(7), { ...MEASURED_TIMINGS, provisioning: { minMs: 20_000, maxMs: 40_000 }, callLatency: { minMs: 20, maxMs: 200 } });
  readonly store = new MemoryStateStore();
  readonly acts: Act[] = [];
  /** Side effects made while the store named another holder (must stay empty). */
  readonly unleased: string[] = [];

  /** A port whose side effects are recorded, each checked against the store's lease as it starts. */
  private instrument<T extends object>(target: T, replica: string, cluster: string): T {
    return new Proxy(target, {
      get: (object, key) => {
        const value: unknown = Reflect.get(object, key);
        if (typeof value !== 'function' || typeof key !== 'string' || !SIDE_EFFECTS.has(key)) return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(object) : value;
        const method = value as (...args: unknown[]) => Promise<unknown>;
        return async (...args: unknown[]): Promise<unknown> => {
          const start = this.clock.now();
          const lease = await this.store.getLease(cluster);
          if (lease?.holder !== replica) this.unleased.push(`${replica} ${key} at ${String(start)} while ${lease?.holder ?? 'nobody'} held the lease`);
          try {
            return await method.apply(object, args);
          } finally {
            this.acts.push({ replica, method: key, start, end: this.clock.now() });
          }
        };
      },
    });
  }

  replica(id: string, store: StateStore = this.store, metrics?: ControllerMetrics): Controller {
    return new Controller({
      store,
      id,
      clock: this.clock,
      timers: clockTimers(this.clock),
      maxConcurrentReconciles: 4,
      leaseTtlMs: TTL,
      ...(metrics ? { metrics } : {}),
      depsFor: (cp, writer, notify) =>
        Promise.resolve({
          cluster: cp.metadata.name,
          etcd: this.instrument(new ModelEtcdAdmin(this.world), id, cp.metadata.name),
          provider: this.instrument(new ModelProvider(this.world), id, cp.metadata.name),
          store,
          writer,
          clock: this.clock,
          failpoint: () => undefined,
          notify,
        }),
    });
  }

  async converged(cluster: string, generation: number): Promise<boolean> {
    const cp = await this.store.getControlPlane(cluster);
    return cp?.lastPass?.generation === generation && cp.lastPass.converged;
  }

  /** Lets virtual time run until the cluster converged at the generation (or a bound). */
  async until(cluster: string, generation: number, boundMs: number): Promise<void> {
    const end = this.clock.now() + boundMs;
    while (!(await this.converged(cluster, generation))) {
      assert.ok(this.clock.now() < end, `${cluster} did not converge to generation ${String(generation)} within ${String(boundMs)}ms of virtual time`);
      await this.clock.sleep(500);
    }
  }
}

/** A store whose lease renewals can be made to hang for one replica (a stalled network path). */
function stallable(store: MemoryStateStore): { store: StateStore; stall: () => void; renewals: number[] } {
  let stalled = false;
  const renewals: number[] = [];
  const wrapped = new Proxy(store, {
    get(object, key) {
      const value: unknown = Reflect.get(object, key);
      if (typeof value !== 'function') return value;
      const method = (value as (...args: unknown[]) => unknown).bind(object);
      if (key !== 'renewLease') return method;
      return async (cluster: string, token: string, now: number): Promise<unknown> => {
        if (stalled) return new Promise(() => undefined);
        const lease = await store.renewLease(cluster, token, now);
        if (lease) renewals.push(now);
        return lease;
      };
    },
  });
  return {
    store: wrapped,
    stall: () => {
      stalled = true;
    },
    renewals,
  };
}

class CountingMetrics implements ControllerMetrics {
  readonly changes = new Map<string, number>();
  readonly leading = new Map<string, boolean>();
  readonly ready = new Map<string, boolean>();
  readonly timesToReady: number[] = [];
  readonly passes = new Map<string, number>();
  reconcileDuration(cluster: string): void {
    this.passes.set(cluster, (this.passes.get(cluster) ?? 0) + 1);
  }
  membershipChange(cluster: string, action: string, result: ChangeResult): void {
    const key = `${cluster} ${action} ${result}`;
    this.changes.set(key, (this.changes.get(key) ?? 0) + 1);
  }
  etcdRefusal(): void {}
  machines(): void {}
  controlPlaneReady(cluster: string, ready: boolean): void {
    this.ready.set(cluster, ready);
  }
  timeToReady(seconds: number): void {
    this.timesToReady.push(seconds);
  }
  leader(cluster: string, leading: boolean): void {
    this.leading.set(cluster, leading);
  }
  forget(cluster: string): void {
    this.leading.delete(cluster);
  }
}

describe('controller on the model, virtual time', () => {
  test('one replica brings a control plane up, follows a new generation, releases its lease when stopped', async () => {
    const fleet = new Fleet();
    const metrics = new CountingMetrics();
    const controller = fleet.replica('ctl-a', fleet.store, metrics);
    await controller.start();
    try {
      await fleet.store.applySpec(manifest('alpha', 3), fleet.clock.now());
      await fleet.until('alpha', 1, 10 * 60_000);
      assert.equal(metrics.changes.get('alpha PromoteLearner ok'), 2);
      assert.equal(metrics.leading.get('alpha'), true);
      assert.equal(metrics.ready.get('alpha'), true);
      assert.equal(metrics.timesToReady.length, 1);
      assert.equal((await fleet.store.getLease('alpha'))?.holder, 'ctl-a');

      // Nobody runs a command: the watch hands the new generation to the queue.
      await fleet.store.applySpec(manifest('alpha', 5), fleet.clock.now());
      await fleet.until('alpha', 2, 10 * 60_000);
      assert.equal(metrics.changes.get('alpha PromoteLearner ok'), 4);
      assert.equal(metrics.timesToReady.length, 2);
    } finally {
      await controller.stop(5_000);
    }
    assert.equal(await fleet.store.getLease('alpha'), undefined, 'every lease is released on stop');
    assert.deepEqual(fleet.world.violations, []);
    assert.deepEqual(fleet.unleased, []);
  });

  test('two replicas, one cluster: never both acting; a replica whose renewals stall stops before its lease can expire', async () => {
    const fleet = new Fleet();
    const a = stallable(fleet.store);
    const replicaA = fleet.replica('ctl-a', a.store);
    const replicaB = fleet.replica('ctl-b');
    await fleet.store.applySpec(manifest('alpha', 5), fleet.clock.now());
    await replicaA.start();
    await fleet.clock.sleep(100);
    await replicaB.start();
    try {
      // A leads; B keeps asking. Mid bring-up, A's renewals hang while A itself keeps running passes.
      while (!fleet.acts.some((act) => act.replica === 'ctl-a' && act.method === 'promoteLearner')) await fleet.clock.sleep(200);
      assert.deepEqual(replicaB.leading, []);
      a.stall();
      await fleet.until('alpha', 1, 20 * 60_000);
    } finally {
      await Promise.all([replicaA.stop(5_000), replicaB.stop(5_000)]);
    }
    const actsOf = (replica: string): Act[] => fleet.acts.filter((act) => act.replica === replica);
    const lastRenewal = a.renewals.at(-1) ?? 0;
    const expiry = lastRenewal + TTL;
    assert.ok(actsOf('ctl-b').length > 0, 'B took over and finished the bring-up');
    for (const act of actsOf('ctl-a')) {
      assert.ok(act.end < expiry, `A's ${act.method} ended at ${String(act.end)}, after its lease could expire (${String(expiry)})`);
      // The renew deadline: every call started with room for the whole bound.
      const renewedBefore = Math.max(...a.renewals.filter((at) => at <= act.start), 0);
      assert.ok(act.start + leaseCallBoundMs(TTL) < (renewedBefore || act.start) + TTL, `A's ${act.method} at ${String(act.start)} started too close to the end of its lease`);
    }
    const lastOfA = Math.max(...actsOf('ctl-a').map((act) => act.end));
    for (const act of actsOf('ctl-b')) assert.ok(act.start > lastOfA, `B's ${act.method} at ${String(act.start)} overlaps A's acts (until ${String(lastOfA)})`);
    assert.deepEqual(fleet.unleased, []);
    assert.deepEqual(fleet.world.violations, []);
  });
});

/** A store that counts the write batches committed to it. */
function counting(store: MemoryStateStore): { store: StateStore; commits: () => number } {
  let commits = 0;
  const wrapped = new Proxy(store, {
    get(object, key) {
      const value: unknown = Reflect.get(object, key);
      if (typeof value !== 'function') return value;
      const method = (value as (...args: unknown[]) => unknown).bind(object);
      if (key !== 'commit') return method;
      return (...args: unknown[]): unknown => {
        commits++;
        return method(...args);
      };
    },
  });
  return { store: wrapped, commits: () => commits };
}

describe('controller in guarded mode (reconfigurationCheck: fastplane), virtual time', () => {
  const GUARDED = { reconfigurationCheck: 'fastplane' as const };

  async function waitsOf(fleet: Fleet, cluster: string): Promise<string[]> {
    return (await fleet.store.getControlPlane(cluster))?.lastPass?.waits ?? [];
  }

  test('a killed voter is removed and replaced: the readings a guarded removal needs are kept from pass to pass', async () => {
    const fleet = new Fleet();
    const controller = fleet.replica('ctl-a');
    await controller.start();
    try {
      await fleet.store.applySpec(manifest('guarded', 3, GUARDED, { unhealthyAfter: '3s' }), fleet.clock.now());
      await fleet.until('guarded', 1, 10 * 60_000);
      const voters = (await fleet.store.listMachines('guarded')).filter((m) => m.phase === 'Voter');
      assert.equal(voters.length, 3);
      const victim = voters[0]?.name ?? '';
      fleet.world.killMember(victim);
      const end = fleet.clock.now() + 3 * 60_000;
      const seen = new Set<string>();
      for (;;) {
        for (const wait of await waitsOf(fleet, 'guarded')) seen.add(wait.split(':')[0] ?? '');
        const names = (await fleet.store.listMachines('guarded')).map((m) => m.name);
        if (!names.includes(victim) && (await fleet.converged('guarded', 1))) break;
        assert.ok(fleet.clock.now() < end, `the controller did not replace ${victim} within 3 min of virtual time; last waits: ${(await waitsOf(fleet, 'guarded')).join('; ')}`);
        await fleet.clock.sleep(500);
      }
      assert.equal(fleet.world.healthyVoterCount('guarded'), 3);
      const removed = (await fleet.store.listEvents('guarded')).find((e) => e.action === 'RemoveMember' && e.machine === victim && e.outcome === 'Succeeded');
      assert.ok(removed, `${victim}'s member was removed`);
    } finally {
      await controller.stop(5_000);
    }
    assert.deepEqual(fleet.world.violations, []);
  });

  test('a wait that does not move: no store write and fewer passes while it lasts', async () => {
    const fleet = new Fleet();
    const counted = counting(fleet.store);
    const metrics = new CountingMetrics();
    const controller = fleet.replica('ctl-a', counted.store, metrics);
    await controller.start();
    try {
      // A voter dies but is never remediated (unhealthyAfter 1 h): new machines wait at the join gate.
      await fleet.store.applySpec(manifest('stuck', 3, GUARDED, { unhealthyAfter: '1h' }), fleet.clock.now());
      await fleet.until('stuck', 1, 10 * 60_000);
      const voter = (await fleet.store.listMachines('stuck')).find((m) => m.phase === 'Voter');
      fleet.world.killMember(voter?.name ?? '');
      await fleet.store.applySpec(manifest('stuck', 5, GUARDED, { unhealthyAfter: '1h' }), fleet.clock.now());
      const end = fleet.clock.now() + 5 * 60_000;
      // Both new machines provisioned: a machine that becomes Provisioned inside the window is a change.
      const provisioning = async (): Promise<boolean> => (await fleet.store.listMachines('stuck')).some((m) => m.phase === 'Pending' || m.phase === 'Provisioning');
      while (!(await waitsOf(fleet, 'stuck')).some((w) => w.startsWith('VoterUnhealthy')) || (await provisioning())) {
        assert.ok(fleet.clock.now() < end, 'the new machines reached the join gate');
        await fleet.clock.sleep(500);
      }
      await fleet.clock.sleep(5_000);
      const commits = counted.commits();
      const passes = metrics.passes.get('stuck') ?? 0;
      await fleet.clock.sleep(20_000);
      assert.ok((await waitsOf(fleet, 'stuck')).some((w) => w.startsWith('VoterUnhealthy')), 'still waiting');
      // The model's clients keep writing, so the highest raft index moves: recorded at most every 5 s.
      const written = counted.commits() - commits;
      assert.ok(written <= 4, `${String(written)} write batches in 20 s of a wait that did not change`);
      // At the planner's 100 ms, 200 passes; backing off to 2 s apart after 20 passes that saw the same wait, far fewer.
      const more = (metrics.passes.get('stuck') ?? 0) - passes;
      assert.ok(more > 0 && more <= 40, `${String(more)} passes in 20 s of a wait that did not move`);
    } finally {
      await controller.stop(5_000);
    }
  });
});

describe('renew deadline', () => {
  /** A clock that moves only when told. */
  const manualClock = (): Clock & { advance: (ms: number) => void } => {
    let now = 1_000_000;
    return { now: () => now, sleep: () => Promise.resolve(), advance: (ms) => void (now += ms) };
  };

  test('a writer acts only while its last renewal outlives the next call, and stops before the lease is free to others', async () => {
    const clock = manualClock();
    const store = new MemoryStateStore({ isHolderAlive: () => true });
    await store.applySpec(manifest('alpha', 1), clock.now());
    const stalled = stallable(store);
    const keeper = await LeaseKeeper.acquire(stalled.store, 'alpha', { clock, ttlMs: TTL, repeat: () => () => undefined });
    assert.ok(keeper);
    await keeper.writer.verify();
    clock.advance(1_000);
    assert.equal(await keeper.renewNow(), true);
    stalled.stall();
    void keeper.renewNow();
    // The bound is a third of the TTL, the margin a tenth: at 1.6 s after the last renewal it may still act.
    clock.advance(1_600);
    await keeper.writer.verify();
    clock.advance(200);
    await assert.rejects(keeper.writer.verify(), RenewDeadlineError);
    const lease = await store.getLease('alpha');
    assert.ok(lease && !leaseIsFree(lease, clock.now(), () => true), 'stopped while the lease still stood: nobody else could act yet');
    assert.equal(keeper.lost, true);
    await keeper.release();
  });

  test('a writer without a renew deadline (the simulator) is judged only by the store', () => {
    const store = new MemoryStateStore();
    const writer = new FencedWriter(store, { cluster: 'alpha', token: 't' });
    assert.equal(writer.outlivesNextCall(), true);
  });
});

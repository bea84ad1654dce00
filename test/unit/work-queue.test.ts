import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Timers } from '../../src/controller/timers.ts';
import { WorkQueue, type HandleResult } from '../../src/controller/work-queue.ts';

/** Timers that fire only when the test moves time. */
class ManualTimers implements Timers {
  now = 0;
  private pending: { at: number; fn: () => void; live: boolean }[] = [];
  after(ms: number, fn: () => void): () => void {
    const timer = { at: this.now + ms, fn, live: true };
    this.pending.push(timer);
    return () => {
      timer.live = false;
    };
  }
  /** Due times of the live timers, soonest first. */
  get due(): number[] {
    return this.pending.filter((t) => t.live).map((t) => t.at).sort((a, b) => a - b);
  }
  advance(ms: number): void {
    this.now += ms;
    const due = this.pending.filter((t) => t.live && t.at <= this.now);
    this.pending = this.pending.filter((t) => !due.includes(t));
    for (const timer of due) timer.fn();
  }
}

const settle = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

function deferred(): { promise: Promise<HandleResult>; resolve: (r: HandleResult) => void } {
  let resolve: (r: HandleResult) => void = () => undefined;
  const promise = new Promise<HandleResult>((r) => (resolve = r));
  return { promise, resolve };
}

test('keys are de-duplicated, one worker per key, concurrency bounded; a key added while handled is handled again after', async () => {
  const timers = new ManualTimers();
  const handled: string[] = [];
  const inFlight = new Map<string, ReturnType<typeof deferred>>();
  let peak = 0;
  const queue = new WorkQueue(
    {
      maxConcurrent: 2,
      timers,
      handle: (key) => {
        assert.ok(!inFlight.has(key), `${key} handled by two workers at once`);
        handled.push(key);
        const d = deferred();
        inFlight.set(key, d);
        peak = Math.max(peak, inFlight.size);
        return d.promise.finally(() => inFlight.delete(key));
      },
    },
    () => timers.now,
  );
  for (const key of ['a', 'b', 'c', 'c', 'a', 'c']) queue.add(key);
  assert.deepEqual(handled, ['a', 'b']);
  assert.equal(queue.depth, 1, 'c waits once, however often it was added');
  inFlight.get('a')?.resolve({});
  await settle();
  assert.deepEqual(handled, ['a', 'b', 'c']);
  inFlight.get('b')?.resolve({});
  await settle();
  assert.deepEqual(handled, ['a', 'b', 'c', 'a'], 'a was added while handled: once more');
  inFlight.get('c')?.resolve({});
  inFlight.get('a')?.resolve({});
  await settle();
  assert.equal(peak, 2);
  assert.equal(queue.handling, 0);
});

test('a requeue keeps the earliest due time; failures back off exponentially and a success resets them', async () => {
  const timers = new ManualTimers();
  const results: (HandleResult | Error)[] = [];
  const queue = new WorkQueue(
    {
      maxConcurrent: 1,
      timers,
      backoffBaseMs: 100,
      backoffMaxMs: 1_000,
      handle: () => {
        const next = results.shift() ?? {};
        return next instanceof Error ? Promise.reject(next) : Promise.resolve(next);
      },
    },
    () => timers.now,
  );
  queue.addAfter('a', 500);
  queue.addAfter('a', 200);
  queue.addAfter('a', 900);
  assert.deepEqual(timers.due, [200]);
  results.push(new Error('boom'), new Error('boom'), { failed: true }, {}, new Error('boom'));
  const delays: number[] = [];
  for (let i = 0; i < 5; i++) {
    const before = timers.now;
    timers.advance((timers.due[0] ?? before) - before);
    await settle();
    delays.push((timers.due[0] ?? Number.NaN) - timers.now);
  }
  // 3 failures: 100, 200, 400; a success without requeue schedules nothing; then a fresh failure: 100 again.
  assert.deepEqual(delays.slice(0, 3), [100, 200, 400]);
  assert.ok(Number.isNaN(delays[3]));
  queue.add('a');
  await settle();
  assert.equal((timers.due[0] ?? Number.NaN) - timers.now, 100);
  await queue.shutdown(1_000);
  assert.deepEqual(timers.due, [], 'shutdown cancels every delayed key');
});

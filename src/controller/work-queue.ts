import { within, type Timers } from './timers.ts';

/** What handling a key asks for next. */
export interface HandleResult {
  /** Look again after this long (the planner's requeueAfterMs); undefined: only when told (a spec change). */
  requeueAfterMs?: number;
  /** An action failed: retry with exponential backoff instead of at the planner's pace. */
  failed?: boolean;
}

export interface WorkQueueOptions {
  /** Keys handled at the same time, at most (each key by one worker at a time, whatever this is). */
  maxConcurrent: number;
  timers: Timers;
  handle: (key: string) => Promise<HandleResult>;
  /** First retry after a failure; doubled on each further one. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** A handler threw (it is retried with backoff). */
  onError?: (key: string, error: unknown) => void;
}

const DEFAULT_BACKOFF_BASE_MS = 250;
const DEFAULT_BACKOFF_MAX_MS = 30_000;

/**
 * A level-triggered work queue as Kubernetes controllers use it: keys, not events, are queued, so
 * any number of notifications for a key while it waits are one pass; a key is never handled by two
 * workers at once (one added while handled is handled again right after); delayed adds keep only
 * the earliest; failures back off exponentially per key until a success.
 */
export class WorkQueue {
  private readonly ready: string[] = [];
  private readonly queued = new Set<string>();
  private readonly active = new Map<string, Promise<void>>();
  /** Added again while being handled: handled again when that ends. */
  private readonly dirty = new Set<string>();
  private readonly delayed = new Map<string, { dueAt: number; cancel: () => void }>();
  private readonly failures = new Map<string, number>();
  private stopped = false;
  private readonly baseMs: number;
  private readonly maxMs: number;

  constructor(
    private readonly options: WorkQueueOptions,
    private readonly now: () => number,
  ) {
    this.baseMs = options.backoffBaseMs ?? DEFAULT_BACKOFF_BASE_MS;
    this.maxMs = options.backoffMaxMs ?? DEFAULT_BACKOFF_MAX_MS;
  }

  /** Keys waiting for a worker, not counting those handled now or delayed. */
  get depth(): number {
    return this.ready.length;
  }

  get handling(): number {
    return this.active.size;
  }

  add(key: string): void {
    if (this.stopped) return;
    this.cancelDelay(key);
    if (this.active.has(key)) {
      this.dirty.add(key);
      return;
    }
    if (this.queued.has(key)) return;
    this.queued.add(key);
    this.ready.push(key);
    this.pump();
  }

  /** Adds the key after `ms`, unless it is due sooner already. */
  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) {
      this.add(key);
      return;
    }
    const dueAt = this.now() + ms;
    const current = this.delayed.get(key);
    if (current && current.dueAt <= dueAt) return;
    current?.cancel();
    const cancel = this.options.timers.after(ms, () => {
      if (this.delayed.get(key)?.cancel !== cancel) return;
      this.delayed.delete(key);
      this.add(key);
    });
    this.delayed.set(key, { dueAt, cancel });
  }

  /** Drops the key's backoff and any delayed add (the cluster is gone). */
  forget(key: string): void {
    this.failures.delete(key);
    this.cancelDelay(key);
  }

  /** The delay before the next retry of a key that failed `failures` times in a row. */
  backoffMs(failures: number): number {
    return Math.min(this.maxMs, this.baseMs * 2 ** Math.max(0, failures - 1));
  }

  /** Stops taking work and waits for the keys being handled, at most `boundMs` (then returns anyway). */
  async shutdown(boundMs: number): Promise<void> {
    this.stopped = true;
    for (const key of [...this.delayed.keys()]) this.cancelDelay(key);
    this.ready.length = 0;
    this.queued.clear();
    this.dirty.clear();
    await within(this.options.timers, boundMs, Promise.allSettled([...this.active.values()]));
  }

  private cancelDelay(key: string): void {
    this.delayed.get(key)?.cancel();
    this.delayed.delete(key);
  }

  private pump(): void {
    while (!this.stopped && this.active.size < this.options.maxConcurrent && this.ready.length > 0) {
      const key = this.ready.shift();
      if (key === undefined) break;
      this.queued.delete(key);
      this.active.set(key, this.run(key));
    }
  }

  private async run(key: string): Promise<void> {
    let result: HandleResult;
    try {
      result = await this.options.handle(key);
    } catch (error) {
      this.options.onError?.(key, error);
      result = { failed: true };
    }
    this.active.delete(key);
    this.schedule(key, result);
    this.pump();
  }

  private schedule(key: string, result: HandleResult): void {
    if (result.failed === true) {
      const failures = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, failures);
      const retryMs = Math.max(result.requeueAfterMs ?? 0, this.backoffMs(failures));
      if (this.dirty.delete(key)) this.add(key);
      else this.addAfter(key, retryMs);
      return;
    }
    this.failures.delete(key);
    if (this.dirty.delete(key)) this.add(key);
    else if (result.requeueAfterMs !== undefined) this.addAfter(key, result.requeueAfterMs);
  }
}

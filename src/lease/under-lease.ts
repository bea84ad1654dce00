import type { FencedWriter } from './fenced-writer.ts';
import type { Clock } from '../ports/clock.ts';
import type { ProcessIdentity, StateStore } from '../ports/state-store.ts';
import { LeaseKeeper } from './lease-keeper.ts';

export interface UnderLeaseOptions {
  clock: Clock;
  /** How long a live holder gets to stop once asked. */
  waitMs: number;
  /** After waitMs, take the lease from a holder that did not stop (it is fenced out). */
  force: boolean;
  /** The lease's TTL (default DEFAULT_LEASE_TTL_MS). */
  ttlMs?: number;
  /** This process's identity for the lease record (LeaseKeeperOptions.identity). */
  identity?: ProcessIdentity | undefined;
  /** Told who was asked to stop, once. */
  onAsked?: (holder: string) => void;
}

export type UnderLeaseResult<T> = { done: true; value: T } | { done: false };

/**
 * Runs `work` holding the cluster's lease, like any writer, so no reconcile pass runs meanwhile: a
 * live holder is asked to stop and given `waitMs` to finish its in-flight actions; with `force` it is
 * then fenced out (its next write fails). `done: false` when the holder kept the lease.
 */
export async function underLease<T>(store: StateStore, cluster: string, options: UnderLeaseOptions, work: (writer: FencedWriter) => Promise<T>): Promise<UnderLeaseResult<T>> {
  const { clock } = options;
  const deadline = clock.now() + options.waitMs;
  let asked = false;
  for (;;) {
    const keeper = await LeaseKeeper.acquire(store, cluster, { clock, identity: options.identity, force: options.force && clock.now() >= deadline, ...(options.ttlMs === undefined ? {} : { ttlMs: options.ttlMs }) });
    if (keeper) {
      try {
        return { done: true, value: await work(keeper.writer) };
      } finally {
        await keeper.release();
      }
    }
    const lease = await store.getLease(cluster);
    if (lease && !asked) {
      await store.requestStop(cluster, lease.token);
      options.onAsked?.(lease.holder);
      asked = true;
    }
    if (clock.now() >= deadline && !options.force) return { done: false };
    await clock.sleep(200);
  }
}

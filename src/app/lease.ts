import { BlockedError } from '../care/blocked-error.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { underLease, type UnderLeaseOptions } from '../lease/under-lease.ts';
import { systemClock } from '../ports/clock.ts';
import type { Note, Runtime } from './runtime.ts';

// How use cases other than a reconcile hold a cluster's lease: to delete the cluster, or for day-2 work.

/** How long day-2 work waits for a running reconcile to stop before it gives up. */
const DAY_TWO_WAIT_MS = 30_000;

/** How work under a cluster's lease ended: done, or not done with why (another holder, a safety gate). */
export type LeaseWork<T> = { done: true; value: T } | { done: false; reason: 'HeldElsewhere' | 'Blocked'; message: string };

/** How a use case takes a cluster's lease: it asks a running reconcile to stop, and says so. */
export function leaseOptions(runtime: Runtime, name: string, options: { waitMs: number; force: boolean }, onNote?: Note): UnderLeaseOptions {
  return {
    ...options,
    clock: systemClock,
    ttlMs: runtime.leaseTtlMs,
    identity: runtime.identity,
    onAsked: (holder) => onNote?.(`asked ${holder} to stop reconciling ${name}`),
  };
}

/**
 * Runs day-2 work (certificate renewal, maintenance, recovery) holding the cluster's lease, so no
 * reconcile runs at the same time. A holder that keeps the lease, or a safety gate the work hits
 * (BlockedError), ends it not done, with the reason.
 */
export async function underClusterLease<T>(runtime: Runtime, name: string, what: string, work: (writer: FencedWriter) => Promise<T>, onNote?: Note): Promise<LeaseWork<T>> {
  try {
    const result = await underLease(runtime.store, name, leaseOptions(runtime, name, { waitMs: DAY_TWO_WAIT_MS, force: false }, onNote), work);
    if (result.done) return { done: true, value: result.value };
    return { done: false, reason: 'HeldElsewhere', message: `another fastplane process still reconciles ${name}; ${what} not done` };
  } catch (error) {
    if (!(error instanceof BlockedError)) throw error;
    return { done: false, reason: 'Blocked', message: `${what} of ${name} stopped: ${error.message}` };
  }
}

import type { ControlPlane } from '../api/control-plane.ts';
import { BlockedError } from '../care/blocked-error.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { underLease, type UnderLeaseOptions } from '../lease/under-lease.ts';
import { systemClock } from '../ports/clock.ts';
import type { CliContext } from './context.ts';

// How commands other than `up` hold a cluster's lease: to delete the cluster, or for day-2 work.

/** Stops every member of a control plane by PID and deletes its machines and records, under the lease. */
export async function destroyControlPlane(ctx: CliContext, manifest: ControlPlane, writer: FencedWriter): Promise<void> {
  const name = manifest.metadata.name;
  await writer.verify();
  await ctx.provider(manifest).destroyCluster(name);
  await ctx.store.deleteControlPlane(writer.lease);
}

/**
 * Deletes a control plane under its lease, like any writer: a live holder is asked to stop and given
 * `waitMs` to finish its in-flight actions; with `force` it is then fenced out (its next write fails).
 * False when the holder did not stop and `force` was not given.
 */
export async function destroyUnderLease(ctx: CliContext, manifest: ControlPlane, options: { waitMs: number; force: boolean }): Promise<boolean> {
  const result = await underLease(ctx.store, manifest.metadata.name, leaseOptions(ctx, manifest.metadata.name, options), (writer) => destroyControlPlane(ctx, manifest, writer));
  return result.done;
}

/** How a command other than `up` takes a cluster's lease: it asks a running reconcile to stop, and says so. */
export function leaseOptions(ctx: CliContext, name: string, options: { waitMs: number; force: boolean }): UnderLeaseOptions {
  return {
    ...options,
    clock: systemClock,
    ttlMs: ctx.leaseTtlMs,
    identity: ctx.identity,
    onAsked: (holder) => {
      process.stderr.write(`asked ${holder} to stop reconciling ${name}\n`);
    },
  };
}

const LEASE_WAIT_MS = 30_000;

/**
 * Runs day-2 work (`certs renew`, `maintain`, `recover --yes`) holding the cluster's lease, so no
 * reconcile runs at the same time. A holder that keeps the lease, or a safety gate the work hits
 * (BlockedError), is an error line and exit 3; undefined is returned then.
 */
export async function underLeaseOrBlocked<T>(ctx: CliContext, name: string, what: string, work: (writer: FencedWriter) => Promise<T>): Promise<T | undefined> {
  try {
    const result = await underLease(ctx.store, name, leaseOptions(ctx, name, { waitMs: LEASE_WAIT_MS, force: false }), work);
    if (result.done) return result.value;
    process.stderr.write(`error: another fastplane process still reconciles ${name}; ${what} not done\n`);
  } catch (error) {
    if (!(error instanceof BlockedError)) throw error;
    process.stderr.write(`error: ${what} of ${name} stopped: ${error.message}\n`);
  }
  return undefined;
}

import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { FencedWriter } from './fenced-writer.ts';
import type { Clock } from '../ports/clock.ts';
import type { Logger } from '../ports/logger.ts';
import type { LeaseRecord, ProcessIdentity, StateStore } from '../ports/state-store.ts';

/** A lease not renewed for this long (on the store's clock) is free for another writer, whatever PID it names. */
export const DEFAULT_LEASE_TTL_MS = 10_000;
/** Renewal at most this far apart, so a holder that is alive is never taken for dead. */
const MAX_RENEW_INTERVAL_MS = 2_000;
/** The etcd client's call timeout at the default TTL: what a guarded call may take at most. */
const MAX_CALL_BOUND_MS = 3_000;

/**
 * How long a call made under a lease of this TTL may take: a third of the TTL (at most the etcd
 * client's default timeout), so that with renewals every fifth of the TTL, a holder may miss a
 * renewal or two and still act. Callers give their etcd client this timeout.
 */
export function leaseCallBoundMs(ttlMs: number): number {
  return Math.min(MAX_CALL_BOUND_MS, Math.floor(ttlMs / 3));
}

/**
 * Kept off the TTL before a call: the store's latency and the drift between this process's clock rate
 * and the store's. Not skew between hosts: the store judges expiry on its own clock, from no earlier
 * than the renewal was sent, and this process measures from when it sent it, on its own.
 */
export function leaseMarginMs(ttlMs: number): number {
  return Math.max(100, Math.floor(ttlMs / 10));
}

/** Runs `fn` every `ms` until the returned function is called (setInterval by default). */
export type Repeat = (ms: number, fn: () => void) => () => void;

const intervalRepeat: Repeat = (ms, fn) => {
  const timer = setInterval(fn, ms);
  // A command's process exits when its work is done, not at the next renewal.
  timer.unref();
  return () => {
    clearInterval(timer);
  };
};

export interface LeaseKeeperOptions {
  ttlMs?: number;
  /** Real time: the lease is judged by wall-clock renewals even when the run uses a virtual clock. */
  clock: Clock;
  /**
   * This process as its kernel knows it (the composition root reads it from /proc): what lets another
   * process of this host prove this holder gone. Without it the lease is only ever waited out.
   */
  identity?: ProcessIdentity | undefined;
  /** Take the lease even from a live holder, which is then fenced out (`down --force`). */
  force?: boolean;
  /** Taking, losing, being asked to give up and releasing the lease are logged here at info. */
  log?: Logger;
  /** Who holds it, for messages and `status`: a controller's --id (default host name and PID). */
  holder?: string;
  /** How long a guarded call may take (default leaseCallBoundMs(ttlMs)). */
  callBoundMs?: number;
  /** The renewal timer (a virtual one in simulations). */
  repeat?: Repeat;
  /** Told when a renewal finds the lease taken over, or a stop request (the controller acts on it at once). */
  onChange?: (change: 'lost' | 'stopRequested') => void;
}

/**
 * Holds a cluster's lease while this process reconciles it: renews it in the background and notices
 * when it is lost or when another command asks this holder to stop.
 */
export class LeaseKeeper {
  readonly writer: FencedWriter;
  private stopTimer: (() => void) | undefined;
  private stopAsked = false;

  private constructor(
    private readonly store: StateStore,
    private readonly cluster: string,
    private readonly token: string,
    private readonly options: LeaseKeeperOptions & { ttlMs: number },
    acquiredAt: number,
    fence: number | undefined,
  ) {
    const { clock, ttlMs } = options;
    this.writer = new FencedWriter(store, { cluster, token, ...(fence === undefined ? {} : { fence }) }, { clock, ttlMs, marginMs: leaseMarginMs(ttlMs), callBoundMs: options.callBoundMs ?? leaseCallBoundMs(ttlMs), renewedAt: acquiredAt });
  }

  /** Takes the lease when it is free; undefined when a live holder has it. */
  static async acquire(store: StateStore, cluster: string, options: LeaseKeeperOptions): Promise<LeaseKeeper | undefined> {
    const ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    const token = randomUUID();
    const { identity } = options;
    // The identity, not the host name, is what lets another process of this host prove this one gone.
    const holder = { token, holder: options.holder ?? `${hostname()}:${String(process.pid)}`, host: hostname(), pid: process.pid, ttlMs, ...(identity ? { identity } : {}) };
    const now = options.clock.now();
    if (!(await store.acquireLease(cluster, holder, now, { force: options.force === true }))) return undefined;
    // The store numbered this holding; provider calls carry the number to the hosts.
    const taken = await store.getLease(cluster);
    const keeper = new LeaseKeeper(store, cluster, token, { ...options, ttlMs }, now, taken?.token === token ? taken.fence : undefined);
    options.log?.info({ cluster, holder: holder.holder, ttlMs }, `lease on ${cluster} taken by ${holder.holder}`);
    keeper.startRenewing();
    return keeper;
  }

  get stopRequested(): boolean {
    return this.stopAsked;
  }

  get lost(): boolean {
    return this.writer.lost;
  }

  private startRenewing(): void {
    const every = Math.min(MAX_RENEW_INTERVAL_MS, Math.max(50, Math.floor(this.options.ttlMs / 5)));
    let renewing = false;
    this.stopTimer = (this.options.repeat ?? intervalRepeat)(every, () => {
      // A renewal still waiting on a slow store is not stacked upon: the renew deadline covers it.
      if (renewing) return;
      renewing = true;
      void this.renew().finally(() => {
        renewing = false;
      });
    });
  }

  /** One renewal: notices a lost lease or a stop request. */
  private async renew(): Promise<LeaseRecord | undefined> {
    if (this.writer.lost) return undefined;
    let lease: LeaseRecord | undefined;
    const sentAt = this.options.clock.now();
    try {
      lease = await this.store.renewLease(this.cluster, this.token, sentAt);
    } catch (error) {
      // A busy store is retried on the next tick; the TTL leaves room for several misses.
      this.writer.renewalFailed(error);
      return undefined;
    }
    if (!lease) {
      this.writer.markLost();
      this.options.log?.info({ cluster: this.cluster }, `lease on ${this.cluster} lost: another process took it over`);
      this.options.onChange?.('lost');
    } else {
      // The store dated the renewal when it was sent: the lease lives from then, not from the answer.
      this.writer.renewed(sentAt);
    }
    if (lease?.stopRequested === true && !this.stopAsked) {
      this.stopAsked = true;
      this.options.log?.info({ cluster: this.cluster }, `asked to give up the lease on ${this.cluster}`);
      this.options.onChange?.('stopRequested');
    }
    return lease;
  }

  /** Renews once now (the controller's replicas renew between passes too; tests drive it directly). */
  async renewNow(): Promise<boolean> {
    return (await this.renew()) !== undefined;
  }

  async release(): Promise<void> {
    this.stopTimer?.();
    this.stopTimer = undefined;
    // Stopped by the renew deadline, the lease may still be ours: hand it over at once (token-checked).
    if (this.writer.lost) {
      await this.store.releaseLease(this.cluster, this.token).catch(() => undefined);
      return;
    }
    await this.store.releaseLease(this.cluster, this.token).catch(() => undefined);
    this.options.log?.info({ cluster: this.cluster }, `lease on ${this.cluster} released`);
  }
}

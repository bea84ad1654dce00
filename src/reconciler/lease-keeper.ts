import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { FencedWriter } from '../executor/fenced-writer.ts';
import type { Clock } from '../ports/clock.ts';
import type { Logger } from '../ports/logger.ts';
import type { LeaseRecord, StateStore } from '../ports/state-store.ts';

/** A lease not renewed for this long is free for another writer, whatever PID it names. */
export const DEFAULT_LEASE_TTL_MS = 10_000;
/** Renewal at most this far apart, so a holder that is alive is never taken for dead. */
const MAX_RENEW_INTERVAL_MS = 2_000;

export interface LeaseKeeperOptions {
  ttlMs?: number;
  /** Real time: the lease is judged by wall-clock renewals even when the run uses a virtual clock. */
  clock: Clock;
  /** Take the lease even from a live holder, which is then fenced out (`down --force`). */
  force?: boolean;
  /** Taking, losing, being asked to give up and releasing the lease are logged here at info. */
  log?: Logger;
}

/**
 * Holds a cluster's lease while this process reconciles it: renews it in the background and notices
 * when it is lost or when another command asks this holder to stop.
 */
export class LeaseKeeper {
  readonly writer: FencedWriter;
  private timer: NodeJS.Timeout | undefined;
  private stopAsked = false;

  private constructor(
    private readonly store: StateStore,
    private readonly cluster: string,
    private readonly token: string,
    private readonly options: LeaseKeeperOptions & { ttlMs: number },
  ) {
    this.writer = new FencedWriter(store, { cluster, token });
  }

  /** Takes the lease when it is free; undefined when a live holder has it. */
  static async acquire(store: StateStore, cluster: string, options: LeaseKeeperOptions): Promise<LeaseKeeper | undefined> {
    const ttlMs = options.ttlMs ?? DEFAULT_LEASE_TTL_MS;
    const token = randomUUID();
    const holder = { token, holder: `${hostname()}:${String(process.pid)}`, host: hostname(), pid: process.pid, ttlMs };
    if (!(await store.acquireLease(cluster, holder, options.clock.now(), { force: options.force === true }))) return undefined;
    const keeper = new LeaseKeeper(store, cluster, token, { ...options, ttlMs });
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
    this.timer = setInterval(() => {
      void this.renew();
    }, every);
    this.timer.unref();
  }

  /** One renewal: notices a lost lease or a stop request. */
  private async renew(): Promise<LeaseRecord | undefined> {
    if (this.writer.lost) return undefined;
    let lease: LeaseRecord | undefined;
    try {
      lease = await this.store.renewLease(this.cluster, this.token, this.options.clock.now());
    } catch {
      // A busy store is retried on the next tick; the TTL leaves room for several misses.
      return undefined;
    }
    if (!lease) {
      this.writer.markLost();
      this.options.log?.info({ cluster: this.cluster }, `lease on ${this.cluster} lost: another process took it over`);
    } else if (lease.stopRequested && !this.stopAsked) {
      this.stopAsked = true;
      this.options.log?.info({ cluster: this.cluster }, `asked to give up the lease on ${this.cluster}`);
    }
    return lease;
  }

  async release(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
    if (this.writer.lost) return;
    await this.store.releaseLease(this.cluster, this.token).catch(() => undefined);
    this.options.log?.info({ cluster: this.cluster }, `lease on ${this.cluster} released`);
  }
}

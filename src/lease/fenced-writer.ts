import type { Clock } from '../ports/clock.ts';
import { FencedOutError, type StateStore, type StoreWrite, type WriterLease } from '../ports/state-store.ts';

/**
 * The renew deadline, as Kubernetes leader election has it: a holder acts only while its last
 * successful renewal keeps the lease alive past the end of the call it is about to make, so a holder
 * whose renewals stall stops acting before anyone else may take the lease over.
 */
export interface RenewDeadline {
  clock: Clock;
  ttlMs: number;
  /** Kept off the TTL for the store's own latency and clock drift; expiry is judged on the store's clock, so skew between hosts does not count. */
  marginMs: number;
  /** The longest a guarded call may take (the etcd client's call timeout, a provider call's bound). */
  callBoundMs: number;
  /** When the last successful renewal (or the acquisition) was sent, by `clock`. */
  renewedAt: number;
}

/** Stopped acting because the lease might expire during the next call (renewals stalled). */
export class RenewDeadlineError extends FencedOutError {
  constructor(cluster: string, sinceRenewalMs: number, lastRenewalError?: string) {
    super(cluster);
    const why = lastRenewalError === undefined ? '' : ` (the last renewal failed: ${lastRenewalError})`;
    this.message = `the lease of control plane ${cluster} was last renewed ${String(sinceRenewalMs)}ms ago${why} and might expire during the next call; stopped acting on it`;
  }
}

/**
 * A membership change held before one of its steps (a pre-check or the call itself): the steps left
 * would not all end before the renew deadline. Nothing was sent; the next pass observes again.
 */
export class RenewDeadlineHoldError extends Error {
  override readonly name = 'RenewDeadlineHoldError';
}

/**
 * The only way a reconcile pass writes: every batch is committed under the pass's lease, and once a
 * write is fenced out (or the lease keeper finds the lease gone) every later write and every side
 * effect guarded by `ensureHeld` fails at once, so a writer that lost its lease stops acting.
 */
export class FencedWriter {
  private lostWith: Error | undefined;
  /** What the last failed renewal said, until one succeeds. */
  private lastRenewalError: string | undefined;

  constructor(
    readonly store: StateStore,
    readonly lease: WriterLease,
    private readonly deadline?: RenewDeadline,
  ) {}

  /** The lease's fencing number, for the provider calls made under it (undefined: the store gave none). */
  get fence(): number | undefined {
    return this.lease.fence;
  }

  get lost(): boolean {
    return this.lostWith !== undefined;
  }

  markLost(error: Error = new FencedOutError(this.lease.cluster)): void {
    this.lostWith ??= error;
  }

  /** The lease keeper's successful renewals move the renew deadline on. */
  renewed(at: number): void {
    if (this.deadline && at > this.deadline.renewedAt) this.deadline.renewedAt = at;
    this.lastRenewalError = undefined;
  }

  /** A renewal that failed (the keeper tries again next tick): named if the deadline then passes. */
  renewalFailed(error: unknown): void {
    this.lastRenewalError = error instanceof Error ? error.message : String(error);
  }

  /** Whether the lease, as last renewed, outlives a call of the bound started now. */
  outlivesNextCall(): boolean {
    return this.leaseOutlives(this.deadline?.callBoundMs ?? 0);
  }

  /**
   * Before each step of a membership change: `verify`, then the lease must also outlive the `steps`
   * calls still to make (this one included, each up to the call bound), or nothing is started.
   */
  async verifySteps(steps: number, what: string): Promise<void> {
    await this.verify();
    if (!this.deadline || this.leaseOutlives(this.deadline.callBoundMs * steps)) return;
    const { clock, ttlMs, renewedAt, callBoundMs } = this.deadline;
    const left = renewedAt + ttlMs - clock.now();
    throw new RenewDeadlineHoldError(
      `${what} held: the lease of control plane ${this.lease.cluster} has ${String(left)}ms left, not enough for ${String(steps)} more calls of up to ${String(callBoundMs)}ms each; the next pass observes again`,
    );
  }

  /** Whether the lease, as last renewed, is still alive `ms` from now (with the margin kept off). */
  leaseOutlives(ms: number): boolean {
    if (!this.deadline) return true;
    const { clock, ttlMs, marginMs, renewedAt } = this.deadline;
    return renewedAt + ttlMs - marginMs > clock.now() + ms;
  }

  /** Throws when the lease is known to be gone; costs nothing, so it guards every side effect. */
  ensureHeld(): void {
    if (this.lostWith) throw this.lostWith;
  }

  /**
   * Before a provider or membership call: the lease must still be ours in the store, and recently
   * enough renewed to outlive the call (else this writer stops acting for good: the lease keeper's
   * owner must take the lease again).
   */
  async verify(): Promise<void> {
    this.ensureHeld();
    this.checkRenewDeadline();
    const lease = await this.store.getLease(this.lease.cluster);
    if (lease?.token !== this.lease.token) this.markLost();
    this.ensureHeld();
    // The read may itself have been slow.
    this.checkRenewDeadline();
  }

  async commit(...writes: StoreWrite[]): Promise<void> {
    this.ensureHeld();
    if (writes.length === 0) return;
    try {
      await this.store.commit(this.lease, writes);
    } catch (error) {
      if (error instanceof FencedOutError) this.markLost(error);
      throw error;
    }
  }

  private checkRenewDeadline(): void {
    if (this.outlivesNextCall() || !this.deadline) return;
    this.markLost(new RenewDeadlineError(this.lease.cluster, this.deadline.clock.now() - this.deadline.renewedAt, this.lastRenewalError));
    this.ensureHeld();
  }
}

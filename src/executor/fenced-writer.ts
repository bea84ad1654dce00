import { FencedOutError, type StateStore, type StoreWrite, type WriterLease } from '../ports/state-store.ts';

/**
 * The only way a reconcile pass writes: every batch is committed under the pass's lease, and once a
 * write is fenced out (or the lease keeper finds the lease gone) every later write and every side
 * effect guarded by `ensureHeld` fails at once, so a writer that lost its lease stops acting.
 */
export class FencedWriter {
  private lostWith: Error | undefined;

  constructor(
    readonly store: StateStore,
    readonly lease: WriterLease,
  ) {}

  get lost(): boolean {
    return this.lostWith !== undefined;
  }

  markLost(error: Error = new FencedOutError(this.lease.cluster)): void {
    this.lostWith ??= error;
  }

  /** Throws when the lease is known to be gone; costs nothing, so it guards every side effect. */
  ensureHeld(): void {
    if (this.lostWith) throw this.lostWith;
  }

  /** Asks the store whether the lease is still ours: before a membership change, a round trip is cheap. */
  async verify(): Promise<void> {
    this.ensureHeld();
    const lease = await this.store.getLease(this.lease.cluster);
    if (lease?.token !== this.lease.token) this.markLost();
    this.ensureHeld();
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
}

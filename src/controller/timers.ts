import type { Clock } from '../ports/clock.ts';
import type { Repeat } from '../lease/lease-keeper.ts';

/**
 * Timers as a port, beside the Clock: the controller's queue and lease renewals run on real timers in
 * the CLI and on virtual time in simulations, with no process globals in between.
 */
export interface Timers {
  /** Runs `fn` after `ms`; the returned function cancels it (a no-op once it ran). */
  after(ms: number, fn: () => void): () => void;
}

export const systemTimers: Timers = {
  after(ms, fn) {
    const timer = setTimeout(fn, Math.max(0, ms));
    return () => {
      clearTimeout(timer);
    };
  },
};

/** Timers on a clock's sleep (the simulator's VirtualClock): a cancelled timer simply does nothing when due. */
export function clockTimers(clock: Clock): Timers {
  return {
    after(ms, fn) {
      let live = true;
      void clock.sleep(ms).then(() => {
        if (live) fn();
      });
      return () => {
        live = false;
      };
    },
  };
}

/**
 * The work's outcome, or `{ done: false }` once `ms` have passed first: a call to a store that stopped
 * answering must not hold a shutdown. The work itself is left to end (or fail) on its own.
 */
export async function within<T>(timers: Timers, ms: number, work: Promise<T>): Promise<{ done: true; value: T } | { done: false }> {
  let cancel: (() => void) | undefined;
  const late = new Promise<{ done: false }>((resolve) => {
    cancel = timers.after(ms, () => {
      resolve({ done: false });
    });
  });
  try {
    return await Promise.race([work.then((value) => ({ done: true as const, value })), late]);
  } finally {
    cancel?.();
  }
}

/** A LeaseKeeper renewal timer on these timers. */
export function repeatOn(timers: Timers): Repeat {
  return (ms, fn) => {
    let cancel: (() => void) | undefined;
    let live = true;
    const tick = (): void => {
      if (!live) return;
      fn();
      cancel = timers.after(ms, tick);
    };
    cancel = timers.after(ms, tick);
    return () => {
      live = false;
      cancel?.();
    };
  };
}

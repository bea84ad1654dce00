import type { Clock } from '../ports/clock.ts';

interface Timer {
  at: number;
  seq: number;
  fire: () => void;
  /** A scheduled event (a fault) does not by itself move time forward: only a sleeper does. */
  daemon: boolean;
}

/**
 * Virtual time as a discrete-event scheduler. `sleep` registers a timer; once every runnable promise
 * chain has settled (a macrotask later), time jumps to the earliest timer and fires it, one timer at a
 * time. Concurrent sleepers therefore overlap as they would on a real clock (five 30 s provisioning
 * waits take 30 s, not 150 s), and minutes of provisioning pass in microseconds. The model's state is
 * a function of time (machines ready at readyAt, learners caught up at caughtUpAt), so nothing else
 * needs to tick.
 */
export class VirtualClock implements Clock {
  private readonly timers: Timer[] = [];
  private seq = 0;
  private pumping = false;

  constructor(private current = 0) {}

  now(): number {
    return this.current;
  }

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.enqueue(this.current + Math.max(0, ms), resolve, false);
    });
  }

  /**
   * Runs `fn` when virtual time reaches `at` (or soon, if `at` has passed), between the steps of
   * whatever is running then. Scheduled events fire only while something sleeps past them: an idle
   * simulation keeps its time.
   */
  schedule(at: number, fn: () => void): void {
    this.enqueue(at, fn, true);
  }

  /** Moves time forward without firing anything now; due timers fire at the next step. */
  advance(ms: number): void {
    this.current += Math.max(0, ms);
  }

  /** Scheduled events not fired yet. */
  pendingEvents(): number {
    return this.timers.filter((t) => t.daemon).length;
  }

  private enqueue(at: number, fire: () => void, daemon: boolean): void {
    this.timers.push({ at, seq: this.seq++, fire, daemon });
    this.pump();
  }

  private pump(): void {
    if (this.pumping) return;
    this.pumping = true;
    // setImmediate runs after the microtask queue drains: every chain has moved as far as it can.
    setImmediate(() => {
      this.pumping = false;
      if (!this.timers.some((t) => !t.daemon)) return;
      let next = 0;
      for (let i = 1; i < this.timers.length; i++) {
        const a = this.timers[i];
        const b = this.timers[next];
        if (a && b && (a.at < b.at || (a.at === b.at && a.seq < b.seq))) next = i;
      }
      const [timer] = this.timers.splice(next, 1);
      if (!timer) return;
      this.current = Math.max(this.current, timer.at);
      timer.fire();
      if (this.timers.length > 0) this.pump();
    });
  }
}

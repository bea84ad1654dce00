import type { Clock } from '../ports/clock.ts';

/**
 * Virtual time: sleeping moves the clock forward at once. The model's state is a function of time
 * (machines ready at readyAt, learners caught up at caughtUpAt), so a sleep is all it takes to let
 * minutes of provisioning pass in microseconds.
 */
export class VirtualClock implements Clock {
  constructor(private current = 0) {}

  now(): number {
    return this.current;
  }

  async sleep(ms: number): Promise<void> {
    this.current += Math.max(0, ms);
    // Yield so concurrent promises observe the same ordering as with a real timer.
    await Promise.resolve();
  }

  advance(ms: number): void {
    this.current += ms;
  }
}

import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Runs `tick` every `intervalMs` (from one tick's start to the next) until `stopped()` says so. A tick
 * that throws is skipped, not fatal: a watcher reads machines that come, go and restart between two
 * reads, and the next tick reads again.
 */
export async function pollUntilStopped(intervalMs: number, tick: () => Promise<void>, stopped: () => boolean): Promise<void> {
  while (!stopped()) {
    const started = Date.now();
    try {
      await tick();
    } catch {
      // Read again at the next tick.
    }
    await sleep(Math.max(0, intervalMs - (Date.now() - started)));
  }
}

import type { StateStore } from '../ports/state-store.ts';
import type { Timers } from './timers.ts';

export interface SpecWatch {
  close(): Promise<void>;
}

/** The store's change feed: onChange(cluster) soon after a new generation is stored or the cluster deleted; once per cluster at start. */
export interface SpecSource {
  watchSpecs(onChange: (cluster: string) => void): SpecWatch;
}

const POLL_MS = 250;

/**
 * The store's own watch when it has one; otherwise one listing of every control plane's generation
 * per poll, compared with the last (a single query, not one per cluster).
 */
export function watchSpecsOf(store: StateStore & Partial<SpecSource>, timers: Timers, onChange: (cluster: string) => void): SpecWatch {
  if (typeof store.watchSpecs === 'function') return store.watchSpecs(onChange);
  const seen = new Map<string, number>();
  let closed = false;
  let cancel: (() => void) | undefined;
  let running: Promise<void> = Promise.resolve();
  const poll = async (): Promise<void> => {
    try {
      const now = new Map((await store.listControlPlanes()).map((cp) => [cp.name, cp.generation] as const));
      if (closed) return;
      for (const [name, generation] of now) if (seen.get(name) !== generation) onChange(name);
      for (const name of seen.keys()) if (!now.has(name)) onChange(name);
      seen.clear();
      for (const [name, generation] of now) seen.set(name, generation);
    } catch {
      // A busy or unreachable store is asked again at the next poll; readiness reports it.
    }
  };
  const tick = (): void => {
    running = poll().finally(() => {
      if (!closed) cancel = timers.after(POLL_MS, tick);
    });
  };
  tick();
  return {
    close: async () => {
      closed = true;
      cancel?.();
      await running;
    },
  };
}

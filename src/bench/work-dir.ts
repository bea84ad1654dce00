import { mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { ControlPlane } from '../api/control-plane.ts';

/**
 * The bench dir gets its own state store and provider files. Its machines still never take an address
 * a user's member listens on: the provider skips any address block in use on this host
 * (local-address-slots.ts).
 */
export function prepareWorkDir(stateDir: string): string {
  const stamp = new Date().toISOString().replace(/[:.]/g, '-');
  const dir = join(stateDir, 'bench', `run-${stamp}-${String(process.pid)}`);
  mkdirSync(join(dir, 'provider'), { recursive: true });
  return dir;
}

/**
 * Stops the bench clusters when the user interrupts a bench: their members run detached otherwise.
 * Twice, because the reconcile loop is still running and may restart a member the first pass stopped.
 * `after` runs once they are down (the bench's network lab removed). Returns the function that removes the handlers.
 */
export function stopOnSignal(active: ReadonlySet<ControlPlane>, destroy: (manifest: ControlPlane) => Promise<void>, workDir: string, after: () => void = () => undefined): () => void {
  const onSignal = (signal: NodeJS.Signals): void => {
    process.stderr.write(`bench: ${signal}: stopping the bench clusters\n`);
    const manifests = [...active];
    const stopAll = async (): Promise<void> => {
      await Promise.all(manifests.map(destroy));
    };
    void stopAll()
      .then(stopAll)
      .then(() => {
        rmSync(workDir, { recursive: true, force: true });
      })
      .finally(() => {
        after();
        process.exit(130);
      });
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  return () => {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  };
}

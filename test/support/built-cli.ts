import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { withLock } from '../../src/adapters/state-files.ts';

/**
 * The bundled CLI the tests run, `dist/cli/main.js` (`npm run build`, as `bin/fastplane.js` runs it
 * for users): a command started through tsx spent about 1 s of CPU more compiling TypeScript, and
 * the suite runs thousands of commands. It is built again here when any file under src/ is newer,
 * under a lock, so test files started at once build it once.
 */

const ROOT = join(import.meta.dirname, '..', '..');
export const BUILT_CLI = join(ROOT, 'dist', 'cli', 'main.js');

function newestSource(dir: string): number {
  let newest = 0;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    newest = Math.max(newest, entry.isDirectory() ? newestSource(path) : statSync(path).mtimeMs);
  }
  return newest;
}

const fresh = (): boolean => existsSync(BUILT_CLI) && statSync(BUILT_CLI).mtimeMs >= newestSource(join(ROOT, 'src'));

/** Builds dist/ when it is older than src/ (or missing). */
export async function ensureBuiltCli(): Promise<void> {
  if (fresh()) return;
  mkdirSync(join(ROOT, '.cache'), { recursive: true });
  await withLock(join(ROOT, '.cache', 'cli-build.lock'), () => {
    if (!fresh()) execFileSync(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts', 'build.ts')], { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
    return Promise.resolve();
  });
}

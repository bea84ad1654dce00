import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { link, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import { isProcessAlive } from './providers/local/process-status.ts';

/** Files in the state dir that several CLI processes (and parallel machine creations) share. */

let tmpCounter = 0;

/** Write to a temporary file, then rename: a crash never leaves a half-written file. */
export async function writeFileAtomic(path: string, data: string, mode = 0o644): Promise<void> {
  const tmp = `${path}.${String(process.pid)}.${String(++tmpCounter)}.tmp`;
  // The mode is set at creation, so a private key is never readable by others, not even briefly.
  await writeFile(tmp, data, { mode });
  await rename(tmp, path);
}

const STALE_LOCK_MS = 10_000;

/**
 * Runs fn holding an exclusive lock file that names its holder (PID and a unique token). The holder
 * touches it every 2 s, so a lock is broken only when its holder is a process of this host that no
 * longer runs (the state dir is local) or, whatever its PID, when it went untouched for 10 s.
 */
export async function withLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const content = `${String(process.pid)} ${randomUUID()}\n`;
  for (;;) {
    try {
      await writeFile(path, content, { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const held = await readFile(path, 'utf8').catch(() => undefined);
      const age = await stat(path).then((info) => Date.now() - info.mtimeMs, () => 0);
      const holderPid = Number(held?.split(' ')[0]);
      const holderGone = held !== undefined && held.endsWith('\n') && Number.isInteger(holderPid) && holderPid > 0 && !isProcessAlive(holderPid);
      if (held !== undefined && (holderGone || age > STALE_LOCK_MS)) await breakLock(path, held);
      else await sleep(20);
    }
  }
  const touch = setInterval(() => {
    const now = new Date();
    void utimes(path, now, now).catch(() => undefined);
  }, STALE_LOCK_MS / 5);
  touch.unref();
  try {
    return await fn();
  } finally {
    clearInterval(touch);
    await rm(path, { force: true });
  }
}

/**
 * Removes the lock only if it is still the one judged stale: moved aside first (only one breaker
 * wins the move), and put back when what was moved is a newer holder's lock.
 */
async function breakLock(path: string, stale: string): Promise<void> {
  const aside = `${path}.${String(process.pid)}.${String(++tmpCounter)}.broken`;
  try {
    await rename(path, aside);
  } catch {
    return;
  }
  const moved = await readFile(aside, 'utf8').catch(() => undefined);
  if (moved !== stale) await link(aside, path).catch(() => undefined);
  await rm(aside, { force: true });
}

/** A JSON file's content, or undefined when there is no such file (any other error is thrown). */
export async function readJsonIfPresent<T>(path: string): Promise<T | undefined> {
  try {
    return JSON.parse(await readFile(path, 'utf8')) as T;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

/** The file's SHA-256, hex: how snapshots are checked before anything is restored from them. */
export async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { link, readFile, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ProcessIdentity } from '../ports/state-store.ts';
import { isProvenGone, ownIdentity } from './host/process-identity.ts';

/** Files in the state dir that several CLI processes (and parallel machine creations) share. */

let tmpCounter = 0;

/** Write to a temporary file, then rename: a crash never leaves a half-written file. */
export async function writeFileAtomic(path: string, data: string | Buffer, mode = 0o644): Promise<void> {
  const tmp = `${path}.${String(process.pid)}.${String(++tmpCounter)}.tmp`;
  // The mode is set at creation, so a private key is never readable by others, not even briefly.
  await writeFile(tmp, data, { mode });
  await rename(tmp, path);
}

const STALE_LOCK_MS = 10_000;

/** The identity a lock file names (one JSON line); none in a lock of an older version or a torn one. */
function lockHolder(held: string): ProcessIdentity | undefined {
  try {
    const { identity } = JSON.parse(held) as { identity?: Partial<ProcessIdentity> };
    const { bootId, pidNamespace, pid, startTime } = identity ?? {};
    if (typeof bootId === 'string' && typeof pidNamespace === 'string' && typeof pid === 'number' && typeof startTime === 'number') return { bootId, pidNamespace, pid, startTime };
  } catch {
    // Not a lock this version wrote.
  }
  return undefined;
}

/**
 * Runs fn holding an exclusive lock file that names its holder (a unique token and the holder's
 * process identity). The holder touches it every 2 s, so a lock is broken only when its holder is
 * proven gone (src/adapters/host/process-identity.ts: not merely a PID that is free here, which in a
 * state dir shared with a container may be another namespace's) or when this process saw it untouched
 * for 10 s. Its times are only compared with each other, never with this process's clock.
 */
export async function withLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  const identity = ownIdentity();
  const content = `${JSON.stringify({ token: randomUUID(), pid: process.pid, ...(identity ? { identity } : {}) })}\n`;
  let seen: { held: string; mtimeMs: number; since: number } | undefined;
  for (;;) {
    try {
      await writeFile(path, content, { flag: 'wx' });
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const held = await readFile(path, 'utf8').catch(() => undefined);
      const mtimeMs = await stat(path).then((info) => info.mtimeMs, () => undefined);
      if (held === undefined || mtimeMs === undefined) {
        // Released while we looked, most likely.
        await sleep(20);
        continue;
      }
      if (seen?.held !== held || seen.mtimeMs !== mtimeMs) seen = { held, mtimeMs, since: performance.now() };
      const untouched = performance.now() - seen.since > STALE_LOCK_MS;
      // A holder dies mid-write only before its line ends: such a lock is only ever broken as untouched.
      if (untouched || (held.endsWith('\n') && isProvenGone(lockHolder(held)))) await breakLock(path, held);
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

import { createHash, randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { link, readFile, rename, rm, writeFile } from 'node:fs/promises';
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

/** How long a caller waits for a holder that is not proven gone before it gives up with an error. */
const LOCK_WAIT_MS = 60_000;

/** A lock whose holder kept it longer than a caller would wait, and is not proven gone. */
export class LockBusyError extends Error {
  override readonly name = 'LockBusyError';
  constructor(readonly path: string, held: string) {
    super(`${path} is still held (${held.trim()}); if no fastplane process that uses this state dir runs any more, remove the file`);
  }
}

/**
 * A lock taken under a lease fence: the lock names the fence, and a caller with a higher fence breaks
 * a lock held longer than `breakDeposedAfterMs` by a lower one. Its holder has been deposed (a higher
 * fence is only given after its lease was taken), and one frozen mid-act would otherwise keep the new
 * holder out for good; the wait lets an act that still runs come to its end first.
 */
export interface FencedLocking {
  fence: number;
  breakDeposedAfterMs: number;
}

/** The fence a lock file names; 0 for a lock taken outside any lease. */
function lockFence(held: string): number {
  try {
    const { fence } = JSON.parse(held) as { fence?: unknown };
    return typeof fence === 'number' ? fence : 0;
  } catch {
    return 0;
  }
}

/** The identity a lock file names (one JSON line); none in a lock of an older version. */
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
 * process identity). The file appears whole (linked from a written temporary file), so it always
 * names its holder. A lock is broken only when its holder is proven gone
 * (src/adapters/host/process-identity.ts: not merely a PID that is free here, which in a state dir
 * shared with a container may be another namespace's); a holder that is alive but slow or frozen keeps
 * it, however long, and a caller gives up after LOCK_WAIT_MS with LockBusyError. Release removes the
 * lock only while it is still the caller's own.
 */
export async function withLock<T>(path: string, fn: () => Promise<T>, fenced?: FencedLocking): Promise<T> {
  const identity = ownIdentity();
  const content = `${JSON.stringify({ token: randomUUID(), pid: process.pid, ...(identity ? { identity } : {}), ...(fenced ? { fence: fenced.fence } : {}) })}\n`;
  const started = performance.now();
  for (;;) {
    if (await createWhole(path, content)) break;
    const held = await readFile(path, 'utf8').catch(() => undefined);
    if (held === undefined) continue; // released while we looked
    const waited = performance.now() - started;
    if (isProvenGone(lockHolder(held)) || (fenced !== undefined && waited > fenced.breakDeposedAfterMs && lockFence(held) < fenced.fence)) await removeIf(path, held);
    else if (waited > LOCK_WAIT_MS) throw new LockBusyError(path, held);
    else await sleep(20);
  }
  try {
    return await fn();
  } finally {
    await removeIf(path, content);
  }
}

/** Creates `path` holding `content` unless it exists: a reader never sees it empty or half written. */
async function createWhole(path: string, content: string): Promise<boolean> {
  const tmp = `${path}.${String(process.pid)}.${String(++tmpCounter)}.tmp`;
  await writeFile(tmp, content);
  try {
    await link(tmp, path);
    return true;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    return false;
  } finally {
    await rm(tmp, { force: true });
  }
}

/**
 * Removes the lock only if it still holds `expected`: moved aside first (only one caller wins the
 * move), and put back when what was moved is another holder's lock.
 */
async function removeIf(path: string, expected: string): Promise<void> {
  const aside = `${path}.${String(process.pid)}.${String(++tmpCounter)}.broken`;
  try {
    await rename(path, aside);
  } catch {
    return;
  }
  const moved = await readFile(aside, 'utf8').catch(() => undefined);
  if (moved !== expected) await link(aside, path).catch(() => undefined);
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

import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { open, rename, rm, stat, utimes, writeFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';

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
 * Runs fn holding an exclusive lock file. The holder touches it every 2 s, so only a lock left by a
 * crashed process (untouched for 10 s) is ever broken.
 */
export async function withLock<T>(path: string, fn: () => Promise<T>): Promise<T> {
  for (;;) {
    try {
      const handle = await open(path, 'wx');
      await handle.close();
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const age = await stat(path).then((info) => Date.now() - info.mtimeMs, () => 0);
      if (age > STALE_LOCK_MS) await rm(path, { force: true });
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

/** The file's SHA-256, hex: how snapshots are checked before anything is restored from them. */
export async function sha256OfFile(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path)) hash.update(chunk as Buffer);
  return hash.digest('hex');
}

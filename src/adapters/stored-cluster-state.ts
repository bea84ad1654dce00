import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, rm, stat } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import type { StateStore } from '../ports/state-store.ts';
import { withLock, writeFileAtomic } from './state-files.ts';

export type DocumentStore = Pick<StateStore, 'getDocument' | 'putDocument' | 'deleteDocument' | 'listDocuments'>;

const RECORD = 'record/';
const FILE = 'file/';

interface StoredFile {
  mode: number;
  /** base64 */
  data: string;
}

/**
 * A provider's state of one cluster, kept in the record store as documents of its own scope, so any
 * process that shares the store, on any host, acts on the same machines and the same CA. Records are
 * JSON documents; files (the PKI, which works on a directory) are documents too, mirrored into a
 * cache directory on this host before they are read and stored back after they change.
 */
export class StoredClusterState {
  constructor(
    private readonly store: DocumentStore,
    private readonly scope: string,
    /** This host's copy of the files: `<stateDir>/clusters/<cluster>`. */
    readonly cacheDir: string,
  ) {}

  async readRecord<T>(key: string): Promise<T | undefined> {
    const text = await this.store.getDocument(this.scope, RECORD + key);
    return text === undefined ? undefined : (JSON.parse(text) as T);
  }

  async writeRecord(key: string, value: unknown): Promise<void> {
    await this.store.putDocument(this.scope, RECORD + key, JSON.stringify(value));
  }

  async deleteRecord(key: string): Promise<void> {
    await this.store.deleteDocument(this.scope, RECORD + key);
  }

  /** The keys of the records under `prefix`, sorted. */
  async recordKeys(prefix: string): Promise<string[]> {
    const documents = await this.store.listDocuments(this.scope);
    return documents.flatMap((d) => (d.key.startsWith(RECORD + prefix) ? [d.key.slice(RECORD.length)] : []));
  }

  /**
   * Runs `change` on the cache dir's `dirs` (relative paths) once they hold exactly the stored files,
   * then stores what it left there (nothing for `read`). One at a time per cache dir: a copy being
   * changed is never taken for the truth by another call of this host.
   */
  async withFiles<T>(dirs: readonly string[], change: () => Promise<T>, mode: 'change' | 'read' = 'change'): Promise<T> {
    await mkdir(this.cacheDir, { recursive: true, mode: 0o700 });
    return withLock(join(this.cacheDir, 'state.lock'), async () => {
      await this.pullFiles(dirs);
      const result = await change();
      if (mode === 'change') await this.pushFiles(dirs);
      return result;
    });
  }

  /**
   * Makes the cache dir's `dirs` hold exactly the stored files. A cluster whose files
   * were made by a version that kept them on this host only has none stored: those here are stored.
   */
  private async pullFiles(dirs: readonly string[]): Promise<void> {
    const stored = (await this.storedFiles()).filter((d) => within(d.path, dirs));
    if (stored.length === 0) {
      await this.pushFiles(dirs);
      return;
    }
    for (const { path, value } of stored) {
      const file = JSON.parse(value) as StoredFile;
      const data = Buffer.from(file.data, 'base64');
      const current = await readFile(join(this.cacheDir, path)).catch(() => undefined);
      if (current?.equals(data) === true) continue;
      await mkdir(dirname(join(this.cacheDir, path)), { recursive: true, mode: 0o700 });
      await writeFileAtomic(join(this.cacheDir, path), data, file.mode);
    }
    const kept = new Set(stored.map((d) => d.path));
    for (const path of await this.cachedFiles(dirs)) if (!kept.has(path)) await rm(join(this.cacheDir, path), { force: true });
  }

  /** Stores the cache dir's `dirs` as they are now: every file there, and no file that is gone. */
  private async pushFiles(dirs: readonly string[]): Promise<void> {
    const present = await this.cachedFiles(dirs);
    for (const path of present) {
      const [data, info] = await Promise.all([readFile(join(this.cacheDir, path)), stat(join(this.cacheDir, path))]);
      const file: StoredFile = { mode: info.mode & 0o777, data: data.toString('base64') };
      await this.store.putDocument(this.scope, FILE + path, JSON.stringify(file));
    }
    const kept = new Set(present);
    for (const { path } of await this.storedFiles()) if (within(path, dirs) && !kept.has(path)) await this.store.deleteDocument(this.scope, FILE + path);
  }

  private async storedFiles(): Promise<{ path: string; value: string }[]> {
    return (await this.store.listDocuments(this.scope)).flatMap((d) => (d.key.startsWith(FILE) ? [{ path: d.key.slice(FILE.length), value: d.value }] : []));
  }

  /** The files under the cache dir's `dirs`, relative to it; lock and temporary files are not state. */
  private async cachedFiles(dirs: readonly string[]): Promise<string[]> {
    const found: string[] = [];
    for (const dir of dirs) {
      const root = join(this.cacheDir, dir);
      if (!existsSync(root)) continue;
      const entries = await readdir(root, { withFileTypes: true, recursive: true });
      for (const entry of entries) {
        if (entry.isFile() && !/\.(lock|tmp|broken)$/.test(entry.name)) found.push(relative(this.cacheDir, join(entry.parentPath, entry.name)));
      }
    }
    return found.sort();
  }

  /** Every record and file of the cluster, in the store and in the cache dir. */
  async drop(): Promise<void> {
    for (const document of await this.store.listDocuments(this.scope)) await this.store.deleteDocument(this.scope, document.key);
    await rm(this.cacheDir, { recursive: true, force: true });
  }
}

/** Whether a relative path lies under one of `dirs`. */
function within(path: string, dirs: readonly string[]): boolean {
  return dirs.some((dir) => path.startsWith(`${dir}/`));
}

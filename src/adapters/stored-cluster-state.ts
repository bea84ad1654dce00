import { createHash, randomUUID } from 'node:crypto';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, readlink, rename, rm, stat, symlink } from 'node:fs/promises';
import { dirname, join, relative } from 'node:path';
import { DocumentConflictError, type StateStore, type StoredDocument } from '../ports/state-store.ts';
import { withLock, writeFileAtomic } from './state-files.ts';

export type DocumentStore = Pick<StateStore, 'getDocument' | 'putDocument' | 'deleteDocument' | 'putDocuments' | 'listDocuments'>;

const RECORD = 'record/';
const FILE = 'file/';
/** The manifest of the files' current generation: which files, and a hash of each. */
const GENERATION = 'files';
/** Snapshots of stored generations, one folder each, for readers; `current` links the newest seen. */
const GENERATIONS = 'generations';
const CURRENT = 'current';
/** A snapshot no reader has touched for this long is not in use any more. */
const SNAPSHOT_KEPT_MS = 5 * 60_000;
/** How many times a change is run on a generation that another writer replaced before it could store it. */
const CHANGE_ATTEMPTS = 5;

/** A stored file: the incarnation and generation it was stored in, and its content. */
interface StoredFile {
  incarnation?: string;
  generation?: number;
  mode: number;
  /** base64 */
  data: string;
}

/**
 * A generation of a cluster's files. `incarnation` is minted with the first generation: a new cluster
 * of the same name (after `down` or `restore --replace`, which drop every document) has another one.
 */
interface Generation {
  incarnation: string;
  generation: number;
  /** path -> sha256 of its content */
  files: Record<string, string>;
}

/** A whole stored generation (none stored: generation 0 of no incarnation, without files). */
interface Snapshot {
  incarnation?: string;
  generation: number;
  /** The manifest's text as read (none stored: undefined): what a push requires to be still there. */
  manifest?: string;
  files: Map<string, { mode: number; data: Buffer }>;
}

/** The stored files are not one whole generation (written by something else than this class). */
export class TornFilesError extends Error {
  override readonly name = 'TornFilesError';
}

/** Every attempt of a change found its generation replaced by another writer's before it could store it. */
export class FilesChangedError extends Error {
  override readonly name = 'FilesChangedError';
}

/**
 * A provider's state of one cluster, kept in the record store as documents of its own scope, so any
 * process that shares the store, on any host, acts on the same machines and the same CA. Records are
 * JSON documents. Files (the PKI, which works on a directory) are documents too, stored in
 * generations: a change stores every file it changed and the new generation's manifest in one write,
 * and a pull applies a whole generation or nothing. Writers work on a cache directory on this host;
 * readers never write to the store, never take the cache's lock, and read snapshots of their own.
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
   * Runs `change` on the cache dir's `dirs` (relative paths) once they hold exactly the stored
   * generation's files (files of another generation or incarnation left here are discarded), then
   * stores what it left there as the next generation. One at a time per cache dir: a copy being
   * changed is never taken for the truth by another call of this host.
   *
   * When another writer (another host, or another state dir on this one) stored a generation after
   * this pull, the push stores nothing and the change runs again on that generation. A change is a
   * function of the files it finds (make the CA if there is none, issue what is missing, renew, move
   * a rotation on), so running it on the winner's files is what it would have done had it come
   * second: two first uses each minting a CA end with one CA, and neither writer's files are lost.
   * Failing instead would stop a provisioning for a race its user can do nothing about. After
   * CHANGE_ATTEMPTS lost races in a row, FilesChangedError: nothing of this call's is stored.
   */
  async withFiles<T>(dirs: readonly string[], change: () => Promise<T>): Promise<T> {
    await mkdir(this.cacheDir, { recursive: true, mode: 0o700 });
    return withLock(join(this.cacheDir, 'state.lock'), async () => {
      for (let attempt = 1; ; attempt++) {
        const pulled = await this.storedSnapshot();
        await this.applyToCache(pulled, dirs);
        const result = await change();
        try {
          await this.push(pulled, dirs);
          return result;
        } catch (error) {
          if (!(error instanceof DocumentConflictError)) throw error;
          if (attempt >= CHANGE_ATTEMPTS) {
            throw new FilesChangedError(`${this.scope}: the stored files changed under each of ${String(attempt)} attempts of this change (other fastplane processes write them); nothing of it was stored`, { cause: error });
          }
        }
      }
    });
  }

  /**
   * Runs `use` on a snapshot of the stored files (`root` holds them as the cache dir would), and
   * points `current` at it. Writes nothing to the store and takes no lock: a writer of this host is
   * neither waited for nor disturbed. With no files stored, `root` is an empty folder's name.
   */
  async readFiles<T>(use: (root: string) => Promise<T>): Promise<T> {
    const snapshot = await this.storedSnapshot();
    if (snapshot.incarnation === undefined && snapshot.files.size === 0) {
      await rm(join(this.cacheDir, CURRENT), { force: true });
      return use(join(this.cacheDir, GENERATIONS, 'none'));
    }
    return use(await this.materialize(snapshot));
  }

  /** Where `current` leads: the newest stored generation a call of this host has seen. */
  currentDir(): string {
    return join(this.cacheDir, CURRENT);
  }

  /** The stored generation, checked whole; files stored before generations (no manifest) are generation 0. */
  private async storedSnapshot(): Promise<Snapshot> {
    const documents = await this.store.listDocuments(this.scope);
    const manifest = documents.find((d) => d.key === GENERATION);
    const stored = new Map(documents.flatMap((d) => (d.key.startsWith(FILE) ? [[d.key.slice(FILE.length), JSON.parse(d.value) as StoredFile] as const] : [])));
    const decode = (file: StoredFile): { mode: number; data: Buffer } => ({ mode: file.mode, data: Buffer.from(file.data, 'base64') });
    // Files that carry an incarnation but have no manifest are what a `down` interrupted after the
    // manifest went: never brought back. Files without one were stored before generations.
    if (manifest === undefined) return { generation: 0, files: new Map([...stored].flatMap(([path, file]) => (file.incarnation === undefined ? [[path, decode(file)] as const] : []))) };
    const generation = JSON.parse(manifest.value) as Generation;
    const files = new Map<string, { mode: number; data: Buffer }>();
    for (const [path, hash] of Object.entries(generation.files)) {
      const file = stored.get(path);
      const content = file && decode(file);
      if (file?.incarnation !== generation.incarnation || content === undefined || sha256(content.data) !== hash) {
        throw new TornFilesError(`${this.scope}: the stored file ${path} is not the one of generation ${String(generation.generation)}; nothing was applied`);
      }
      files.set(path, content);
    }
    return { incarnation: generation.incarnation, generation: generation.generation, manifest: manifest.value, files };
  }

  /** Makes the cache dir's `dirs` hold exactly the snapshot's files there. */
  private async applyToCache(snapshot: Snapshot, dirs: readonly string[]): Promise<void> {
    for (const [path, file] of snapshot.files) {
      if (!within(path, dirs)) continue;
      const current = await readFile(join(this.cacheDir, path)).catch(() => undefined);
      if (current?.equals(file.data) === true) continue;
      await mkdir(dirname(join(this.cacheDir, path)), { recursive: true, mode: 0o700 });
      await writeFileAtomic(join(this.cacheDir, path), file.data, file.mode);
    }
    for (const path of await filesUnder(this.cacheDir, dirs)) if (!snapshot.files.has(path)) await rm(join(this.cacheDir, path), { force: true });
  }

  /**
   * Stores the cache dir's `dirs` as they are now, on top of `pulled`: the changed files and the new
   * manifest in one write, on the condition, checked by the store inside that write, that the
   * manifest is still the one pulled. So of two writers that pulled the same generation only one
   * stores the next; the other gets DocumentConflictError and nothing of its is stored (another
   * process, or a new cluster of the same name, came first).
   */
  private async push(pulled: Snapshot, dirs: readonly string[]): Promise<void> {
    const present = new Map<string, { mode: number; data: Buffer }>();
    for (const path of await filesUnder(this.cacheDir, dirs)) {
      const [data, info] = await Promise.all([readFile(join(this.cacheDir, path)), stat(join(this.cacheDir, path))]);
      present.set(path, { mode: info.mode & 0o777, data });
    }
    const next = new Map([...pulled.files].filter(([path]) => !within(path, dirs)));
    for (const [path, file] of present) next.set(path, file);
    const changed = [...next].filter(([path, file]) => {
      const before = pulled.files.get(path);
      return before === undefined || before.mode !== file.mode || !before.data.equals(file.data);
    });
    const removed = [...pulled.files.keys()].filter((path) => !next.has(path));
    if (changed.length === 0 && removed.length === 0) return;
    const generation: Generation = { incarnation: pulled.incarnation ?? randomUUID(), generation: pulled.generation + 1, files: {} };
    for (const [path, file] of next) generation.files[path] = sha256(file.data);
    // A generation of a new incarnation stores every file again, each marked with it.
    const puts: StoredDocument[] = (pulled.incarnation === undefined ? [...next] : changed).map(([path, file]) => ({
      key: FILE + path,
      value: JSON.stringify({ incarnation: generation.incarnation, generation: generation.generation, mode: file.mode, data: file.data.toString('base64') } satisfies StoredFile),
    }));
    const stray = (await this.store.listDocuments(this.scope)).flatMap((d) => (d.key.startsWith(FILE) && !next.has(d.key.slice(FILE.length)) ? [d.key] : []));
    await this.store.putDocuments(this.scope, [...puts, { key: GENERATION, value: JSON.stringify(generation) }], stray, { key: GENERATION, value: pulled.manifest });
    await this.materialize({ incarnation: generation.incarnation, generation: generation.generation, files: next });
  }

  /**
   * The snapshot's folder, written once (into a temporary folder, then renamed) and never changed,
   * so a reader that holds its paths is never disturbed; `current` is moved to it unless it leads to
   * a later generation of the same incarnation.
   */
  private async materialize(snapshot: Snapshot): Promise<string> {
    const name = `${snapshot.incarnation ?? 'unversioned'}.${String(snapshot.generation)}`;
    const parent = join(this.cacheDir, GENERATIONS);
    const root = join(parent, name);
    if (!existsSync(root)) {
      const tmp = join(parent, `.${name}.${String(process.pid)}.${randomUUID()}.tmp`);
      for (const [path, file] of snapshot.files) {
        await mkdir(dirname(join(tmp, path)), { recursive: true, mode: 0o700 });
        await writeFileAtomic(join(tmp, path), file.data, file.mode);
      }
      await mkdir(tmp, { recursive: true, mode: 0o700 });
      // Another process may have written the same generation first: its copy is as good.
      await rename(tmp, root).catch(() => rm(tmp, { recursive: true, force: true }));
    }
    const shown = await this.pointCurrentAt(name);
    await pruneSnapshots(parent, [name, shown]);
    return root;
  }

  /** Moves `current` to the snapshot `name` unless it shows a later one of the same incarnation; the name it shows. */
  private async pointCurrentAt(name: string): Promise<string> {
    const link = join(this.cacheDir, CURRENT);
    const [incarnation, generation] = name.split('.');
    const shown = (await readlink(link).catch(() => '')).split('/').pop() ?? '';
    const [shownIncarnation, shownGeneration] = shown.split('.');
    if (shownIncarnation === incarnation && Number(shownGeneration) >= Number(generation)) return shown;
    const tmp = `${link}.${String(process.pid)}.${randomUUID()}.tmp`;
    await symlink(join(GENERATIONS, name), tmp);
    await rename(tmp, link);
    return name;
  }

  /** Every record and file of the cluster, in the store and in the cache dir; the manifest first. */
  async drop(): Promise<void> {
    await this.store.putDocuments(this.scope, [], [GENERATION]);
    for (const document of await this.store.listDocuments(this.scope)) await this.store.deleteDocument(this.scope, document.key);
    await rm(this.cacheDir, { recursive: true, force: true });
  }
}

function sha256(data: Buffer): string {
  return createHash('sha256').update(data).digest('hex');
}

/** Whether a relative path lies under one of `dirs`. */
function within(path: string, dirs: readonly string[]): boolean {
  return dirs.some((dir) => path.startsWith(`${dir}/`));
}

/** The files under `root`'s `dirs`, relative to it; lock and temporary files are not state. */
async function filesUnder(root: string, dirs: readonly string[]): Promise<string[]> {
  const found: string[] = [];
  for (const dir of dirs) {
    if (!existsSync(join(root, dir))) continue;
    const entries = await readdir(join(root, dir), { withFileTypes: true, recursive: true });
    for (const entry of entries) {
      if (entry.isFile() && !/\.(lock|tmp|broken)$/.test(entry.name)) found.push(relative(root, join(entry.parentPath, entry.name)));
    }
  }
  return found.sort();
}

/** Removes the snapshots other than `kept` that nobody wrote for SNAPSHOT_KEPT_MS (a reader's paths stay valid meanwhile). */
async function pruneSnapshots(parent: string, kept: readonly string[]): Promise<void> {
  for (const name of await readdir(parent).catch(() => [])) {
    if (kept.includes(name)) continue;
    const info = await stat(join(parent, name)).catch(() => undefined);
    if (info !== undefined && Date.now() - info.mtimeMs > SNAPSHOT_KEPT_MS) await rm(join(parent, name), { recursive: true, force: true });
  }
}

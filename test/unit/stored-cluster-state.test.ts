import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { FilesChangedError, StoredClusterState, TornFilesError, type DocumentStore } from '../../src/adapters/stored-cluster-state.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import type { DocumentCondition, StoredDocument } from '../../src/ports/state-store.ts';

const dir = mkdtempSync(join(tmpdir(), 'fastplane-files-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});
let hosts = 0;

/** A host's cache dir of cluster `c`, sharing `store` with every other host of the test. */
function host(store: DocumentStore): StoredClusterState {
  return new StoredClusterState(store, 'local-process/c', join(dir, `host-${String(++hosts)}`, 'clusters', 'c'));
}

/** Writes the CA pair into the cache dir (as the PKI code does inside withFiles). */
function writeCa(state: StoredClusterState, cert: string, key: string): Promise<void> {
  mkdirSync(join(state.cacheDir, 'pki'), { recursive: true });
  writeFileSync(join(state.cacheDir, 'pki', 'ca.crt'), cert);
  writeFileSync(join(state.cacheDir, 'pki', 'ca.key'), key, { mode: 0o600 });
  return Promise.resolve();
}

/** The stored content of a file, by its document. */
async function storedFile(store: DocumentStore, path: string): Promise<string | undefined> {
  const value = await store.getDocument('local-process/c', `file/${path}`);
  return value === undefined ? undefined : Buffer.from((JSON.parse(value) as { data: string }).data, 'base64').toString();
}

/**
 * A store whose writes fail at `ca.key`: a single put of it throws after the puts before it landed;
 * a batch holding it throws having stored nothing, as a transaction that fails does.
 */
function failingAtKey(inner: MemoryStateStore): DocumentStore & { failing: boolean } {
  const wrapper = {
    failing: false,
    getDocument: (scope: string, key: string) => inner.getDocument(scope, key),
    listDocuments: (scope: string) => inner.listDocuments(scope),
    deleteDocument: (scope: string, key: string) => inner.deleteDocument(scope, key),
    putDocument: (scope: string, key: string, value: string) => (wrapper.failing && key.endsWith('ca.key') ? Promise.reject(new Error('store unreachable')) : inner.putDocument(scope, key, value)),
    putDocuments: (scope: string, puts: readonly StoredDocument[], deletes: readonly string[], condition?: DocumentCondition) =>
      wrapper.failing && puts.some((p) => p.key.endsWith('ca.key')) ? Promise.reject(new Error('store unreachable')) : inner.putDocuments(scope, puts, deletes, condition),
  };
  return wrapper;
}

/**
 * Two hosts' views of one store whose first batch writes race: the first host's waits until the second
 * host's has been sent (so each read the store before either wrote), then lands first; the second's follows.
 */
function racingWrites(inner: MemoryStateStore): [DocumentStore, DocumentStore] {
  let secondSent!: () => void;
  const sent = new Promise<void>((resolve) => (secondSent = resolve));
  let landed!: () => void;
  const firstLanded = new Promise<void>((resolve) => (landed = resolve));
  const view = (before: () => Promise<void>, after: () => void): DocumentStore => {
    let raced = false;
    return {
      getDocument: (scope, key) => inner.getDocument(scope, key),
      listDocuments: (scope) => inner.listDocuments(scope),
      deleteDocument: (scope, key) => inner.deleteDocument(scope, key),
      putDocument: (scope, key, value) => inner.putDocument(scope, key, value),
      putDocuments: async (scope, puts, deletes, condition) => {
        if (raced) {
          await inner.putDocuments(scope, puts, deletes, condition);
          return;
        }
        raced = true;
        await before();
        try {
          await inner.putDocuments(scope, puts, deletes, condition);
        } finally {
          after();
        }
      },
    };
  };
  const second = view(() => {
    secondSent();
    return firstLanded;
  }, () => undefined);
  return [view(() => sent, landed), second];
}

/** The files of the stored generation, as a reader on yet another host sees them. */
async function storedGeneration(store: DocumentStore): Promise<{ generation: number; files: string[] }> {
  const manifest = JSON.parse((await store.getDocument('local-process/c', 'files')) ?? '{}') as { generation: number; files: Record<string, string> };
  return { generation: manifest.generation, files: Object.keys(manifest.files).sort() };
}

describe('StoredClusterState: files in generations', () => {
  test('two hosts that pulled the same generation: one stores the next, the other runs its change again on it; nothing is lost', async () => {
    const inner = new MemoryStateStore();
    const first = host(inner);
    await first.withFiles(['pki'], () => writeCa(first, 'CERT-1', 'KEY-1'));
    const [storeOfA, storeOfB] = racingWrites(inner);
    const [a, b] = [host(storeOfA), host(storeOfB)];
    const runs = { a: 0, b: 0 };
    const issue = (state: StoredClusterState, name: 'a' | 'b') => () => {
      runs[name] += 1;
      writeFileSync(join(state.cacheDir, 'pki', `${name}.crt`), `issued by ${name}`);
      return Promise.resolve(existsSync(join(state.cacheDir, 'pki', name === 'a' ? 'b.crt' : 'a.crt')));
    };
    // Both pull generation 1 and change it; a's write lands first, b's was sent on generation 1 too.
    const [aSaw, bSaw] = await Promise.all([a.withFiles(['pki'], issue(a, 'a')), b.withFiles(['pki'], issue(b, 'b'))]);
    assert.deepEqual(runs, { a: 1, b: 2 }, 'b lost the race and ran its change again');
    assert.deepEqual([aSaw, bSaw], [false, true], 'the second run of b found a\'s file');
    assert.deepEqual(await storedGeneration(inner), { generation: 3, files: ['pki/a.crt', 'pki/b.crt', 'pki/ca.crt', 'pki/ca.key'] }, 'both changes are in the stored generation');
    const reader = host(inner);
    const read = await reader.readFiles((root) => Promise.resolve(['a.crt', 'b.crt', 'ca.key'].map((f) => readFileSync(join(root, 'pki', f), 'utf8'))));
    assert.deepEqual(read, ['issued by a', 'issued by b', 'KEY-1'], 'the generation is whole, with the one CA');
  });

  test('a change that loses the race every time stores nothing and fails with FilesChangedError', async () => {
    const store = new MemoryStateStore();
    const loser = host(store);
    const rival = host(store);
    await loser.withFiles(['pki'], () => writeCa(loser, 'CERT-1', 'KEY-1'));
    let n = 0;
    // Each run, another host stores a generation after this one's pull.
    const attempt = () => rival.withFiles(['pki'], () => writeCa(rival, `CERT-R${String(++n)}`, 'KEY-1')).then(() => writeCa(loser, 'CERT-L', 'KEY-L'));
    await assert.rejects(loser.withFiles(['pki'], attempt), FilesChangedError);
    assert.equal(await storedFile(store, 'pki/ca.key'), 'KEY-1', 'the loser\'s key was never stored');
    assert.equal(await storedFile(store, 'pki/ca.crt'), `CERT-R${String(n)}`);
  });

  test('a push that fails at the CA key leaves the previous generation whole, and the next pull keeps the local key', async () => {
    const store = failingAtKey(new MemoryStateStore());
    const state = host(store);
    await state.withFiles(['pki'], () => writeCa(state, 'CERT-1', 'KEY-1'));
    store.failing = true;
    await assert.rejects(state.withFiles(['pki'], () => writeCa(state, 'CERT-2', 'KEY-2')), /store unreachable/);
    assert.deepEqual([await storedFile(store, 'pki/ca.crt'), await storedFile(store, 'pki/ca.key')], ['CERT-1', 'KEY-1'], 'the stored pair is still one pair');
    store.failing = false;
    const local = await state.withFiles(['pki'], () => Promise.resolve(readFileSync(join(state.cacheDir, 'pki', 'ca.key'), 'utf8')));
    assert.equal(local, 'KEY-1', 'the pulled generation brings back the key of the stored certificate');
  });

  test("a first push that fails at the CA key stores nothing: no certificate without its key", async () => {
    const store = failingAtKey(new MemoryStateStore());
    const state = host(store);
    store.failing = true;
    await assert.rejects(state.withFiles(['pki'], () => writeCa(state, 'CERT-1', 'KEY-1')), /store unreachable/);
    assert.deepEqual(await store.listDocuments('local-process/c'), [], 'nothing of the failed generation is stored');
  });

  test('a pull applies a whole generation or nothing: a stored file that is not the manifest\'s stops it', async () => {
    const store = new MemoryStateStore();
    const writer = host(store);
    await writer.withFiles(['pki'], () => writeCa(writer, 'CERT-1', 'KEY-1'));
    const stale = host(store);
    await stale.withFiles(['pki'], () => Promise.resolve());
    await writer.withFiles(['pki'], () => writeCa(writer, 'CERT-2', 'KEY-2'));
    // The key's document as a store that lost part of a write would hold it.
    const old = (await store.listDocuments('local-process/c')).find((d) => d.key === 'file/pki/ca.key');
    assert.ok(old);
    await store.putDocument('local-process/c', 'file/pki/ca.key', JSON.stringify({ ...(JSON.parse(old.value) as object), data: Buffer.from('KEY-1').toString('base64') }));
    await assert.rejects(stale.withFiles(['pki'], () => Promise.resolve()), TornFilesError);
    assert.equal(readFileSync(join(stale.cacheDir, 'pki', 'ca.crt'), 'utf8'), 'CERT-1', 'the cached generation is left as it was, not half replaced');
    await assert.rejects(stale.readFiles(() => Promise.resolve()), TornFilesError);
  });

  test('a read stores nothing, even with files of an earlier cluster cached here and none stored', async () => {
    const store = new MemoryStateStore();
    const old = host(store);
    await old.withFiles(['pki'], () => writeCa(old, 'OLD-CERT', 'OLD-KEY'));
    // The cluster goes (`down` drops its documents); this host's copy stays behind.
    await store.putDocuments('local-process/c', [], (await store.listDocuments('local-process/c')).map((d) => d.key));
    const seen = await old.readFiles((root) => Promise.resolve(existsSync(join(root, 'pki', 'ca.crt'))));
    assert.equal(seen, false, 'no files are stored, so a reader sees none');
    assert.deepEqual(await store.listDocuments('local-process/c'), [], 'and stores none');
    // The new cluster's first writer starts from nothing: the earlier cluster's files are discarded.
    const oldKeyThere = await old.withFiles(['pki'], () => Promise.resolve(existsSync(join(old.cacheDir, 'pki', 'ca.key'))));
    assert.equal(oldKeyThere, false, 'the old key is gone before the change runs');
    await old.withFiles(['pki'], () => writeCa(old, 'NEW-CERT', 'NEW-KEY'));
    assert.equal(await storedFile(store, 'pki/ca.crt'), 'NEW-CERT');
    const incarnations = new Set((await store.listDocuments('local-process/c')).map((d) => (JSON.parse(d.value) as { incarnation?: string }).incarnation));
    assert.equal(incarnations.size, 1, 'every stored document carries the one incarnation');
  });

  test('a `down` interrupted after the manifest went never brings its files back', async () => {
    const store = new MemoryStateStore();
    const state = host(store);
    await state.withFiles(['pki'], () => writeCa(state, 'OLD-CERT', 'OLD-KEY'));
    // drop() removes the manifest first, then each document: stopped right after the first step.
    await store.putDocuments('local-process/c', [], ['files']);
    const other = host(store);
    assert.equal(await other.readFiles((root) => Promise.resolve(existsSync(join(root, 'pki', 'ca.crt')))), false, 'a reader sees no files');
    await other.withFiles(['pki'], () => writeCa(other, 'NEW-CERT', 'NEW-KEY'));
    assert.deepEqual([await storedFile(store, 'pki/ca.crt'), await storedFile(store, 'pki/ca.key')], ['NEW-CERT', 'NEW-KEY']);
  });
});

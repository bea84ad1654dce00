import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { StoredClusterState, TornFilesError, type DocumentStore } from '../../src/adapters/stored-cluster-state.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import type { StoredDocument } from '../../src/ports/state-store.ts';

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
    putDocuments: (scope: string, puts: readonly StoredDocument[], deletes: readonly string[]) =>
      wrapper.failing && puts.some((p) => p.key.endsWith('ca.key')) ? Promise.reject(new Error('store unreachable')) : inner.putDocuments(scope, puts, deletes),
  };
  return wrapper;
}

describe('StoredClusterState: files in generations', () => {
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

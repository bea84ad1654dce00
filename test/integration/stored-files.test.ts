import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { Etcd3Admin, readTlsCredentials } from '../../src/adapters/etcd/etcd3-admin.ts';
import { LocalProcessProvider } from '../../src/adapters/providers/local/local-process-provider.ts';
import { openStateStore, type SqliteStateStore } from '../../src/adapters/stores/sqlite-state-store.ts';
import type { TlsFiles } from '../../src/ports/etcd-admin.ts';
import { pidsUnder } from '../support/cli.ts';

// Two hosts (two state dirs) sharing one record store (one SQLite file, a connection each), with real
// etcd members: what host B may do to host A's cluster's certificates by reading.
const PREFIX = '127.20';
const VERSION = '3.4.23';
const SCOPE = 'local-process/c';
const dirs: string[] = [];
const stores: SqliteStateStore[] = [];
const admins: Etcd3Admin[] = [];

function tempDir(name: string): string {
  const dir = mkdtempSync(join(tmpdir(), `fastplane-${name}-`));
  dirs.push(dir);
  return dir;
}

after(async () => {
  for (const admin of admins) await admin.close();
  for (const store of stores) await store.close();
  for (const dir of dirs) {
    for (const pid of pidsUnder(dir)) process.kill(pid, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A host: its own state dir, its own connection to the shared store. */
function hostOn(storeDir: string): LocalProcessProvider {
  const store = openStateStore(storeDir);
  stores.push(store);
  return new LocalProcessProvider({ stateDir: tempDir('host'), addressPrefix: PREFIX, store });
}

/** Starts a one-member cluster `c` on `host` and waits until its member answers over TLS. */
async function upOn(host: LocalProcessProvider, name: string, ordinal: number): Promise<string> {
  const infra = await host.create({ cluster: 'c', name, ordinal });
  await host.startMember('c', name, { memberName: name, version: VERSION, initialCluster: `${name}=${infra.peerURL}`, initialClusterState: 'new', clusterToken: `c-${name}`, maxLearners: 1 });
  await answers(await host.loadClientTls('c'), infra.clientURL);
  return infra.clientURL;
}

/** Resolves once the member at `url` answers a client with these files. */
async function answers(tls: TlsFiles | undefined, url: string): Promise<void> {
  assert.ok(tls);
  const admin = new Etcd3Admin({ callTimeoutMs: 2000, credentials: () => readTlsCredentials(tls) });
  admins.push(admin);
  const deadline = Date.now() + 30_000;
  for (;;) {
    const status = await admin.status(url).catch(() => undefined);
    if (status !== undefined) return;
    if (Date.now() > deadline) throw new Error(`${url} did not answer with these credentials`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** The stored files of cluster c, by path, as text. */
async function storedFiles(store: SqliteStateStore): Promise<Map<string, string>> {
  const documents = await store.listDocuments(SCOPE);
  return new Map(documents.flatMap((d) => (d.key.startsWith('file/') ? [[d.key.slice('file/'.length), Buffer.from((JSON.parse(d.value) as { data: string }).data, 'base64').toString()] as const] : [])));
}

test("a read on another host, while the store holds no files of the cluster, stores nothing: a new cluster of the name gets a new CA, never the old one's", { timeout: 180_000 }, async () => {
  const storeDir = tempDir('store');
  const a = hostOn(storeDir);
  const b = hostOn(storeDir);
  const store = openStateStore(storeDir);
  stores.push(store);

  // The first cluster, up on A and read (status) from B: B holds copies of its CA and client key.
  const firstURL = await upOn(a, 'c-1', 1);
  const oldTls = await b.loadClientTls('c');
  assert.ok(oldTls);
  await answers(oldTls, firstURL);
  const old = { ca: readFileSync(oldTls.caFile, 'utf8'), clientKey: readFileSync(oldTls.keyFile, 'utf8') };

  // `down` on A: every document of the cluster leaves the store; B's copies stay on B.
  await a.destroyCluster('c');
  assert.deepEqual(await store.listDocuments(SCOPE), []);

  // B reads (status, `certs`) while the store holds nothing of the cluster: nothing is stored.
  await b.loadClientTls('c');
  assert.deepEqual(await store.listDocuments(SCOPE), [], "B's status stored none of its old files");
  assert.deepEqual(await b.certificateFiles('c'), []);
  assert.equal(await b.caRotationPhase('c'), undefined);
  assert.deepEqual(await store.listDocuments(SCOPE), [], "nor did any other read");

  // The new cluster of the same name, up on A again: a CA of its own.
  const secondURL = await upOn(a, 'c-2', 2);
  const stored = await storedFiles(store);
  assert.ok(stored.has('pki/ca.crt') && stored.has('pki/ca.key'));
  assert.notEqual(stored.get('pki/ca.crt'), old.ca, 'a new CA');
  assert.ok(![...stored.values()].includes(old.clientKey) && ![...stored.values()].includes(old.ca), "none of B's old files is stored");
  const incarnations = new Set((await store.listDocuments(SCOPE)).flatMap((d) => (d.key.startsWith('file/') ? [(JSON.parse(d.value) as { incarnation?: string }).incarnation] : [])));
  assert.equal(incarnations.size, 1, 'every stored file carries the new cluster\'s incarnation');

  // B now reads the new cluster's files and reaches its member with them.
  const newTls = await b.loadClientTls('c');
  assert.ok(newTls);
  assert.equal(readFileSync(newTls.caFile, 'utf8'), stored.get('pki/ca.crt'));
  await answers(newTls, secondURL);
  await a.destroyCluster('c');
});

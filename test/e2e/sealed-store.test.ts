import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { openKvClient, readTlsCredentials } from '../../src/adapters/etcd/etcd3-admin.ts';
import type { ClientAccess } from '../../src/app/client-access.ts';
import { cliEnvFactory, statusOf, type CliRun } from '../support/cli.ts';

// The providers' documents (every cluster's CA key, member and client keys) sit sealed in the record
// store: whoever reads the store's raw bytes, SQLite file or etcd keys, finds no key and no PEM.
const newEnv = cliEnvFactory();
const keyDir = mkdtempSync(join(tmpdir(), 'fastplane-keys-'));
let kv: Etcd3 | undefined;
after(() => {
  kv?.close();
  rmSync(keyDir, { recursive: true, force: true });
});

const SEALED = /^fastplane:enc:aesgcm:v1:/;

/** What in `text` gives a PEM away: as it is, or base64 of a PEM file's start, as a document would hold it. */
function pemIn(text: string): string[] {
  return ['PRIVATE KEY', '-----BEGIN', Buffer.from('-----BEGIN').toString('base64').slice(0, 12)].filter((needle) => text.includes(needle));
}

function ok(run: CliRun, what: string): CliRun {
  assert.equal(run.code, 0, `${what}: ${run.stderr}`);
  return run;
}

/** A key file holding these named keys (the first seals), private to this user. */
function writeKeys(path: string, keys: [name: string, key: Buffer][]): void {
  writeFileSync(path, keys.map(([name, key]) => `${name}:${key.toString('base64')}\n`).join(''), { mode: 0o600 });
}

test('SQLite store: after up the store file holds no private key nor any PEM, and status reads', { timeout: 240_000 }, async () => {
  const env = newEnv('127.28');
  try {
    ok(await env.run(['up', '--name', 'lite', '--replicas', '1', '--timeout', '120s', '-o', 'json']), 'up');
    const files = ['fastplane.db', 'fastplane.db-wal'].map((f) => join(env.stateDir, f)).filter((f) => existsSync(f));
    for (const file of files) assert.deepEqual(pemIn(readFileSync(file, 'latin1')), [], `${file} gives no key away`);
    const status = statusOf(ok(await env.run(['status', 'lite', '-o', 'json']), 'status').stdout);
    assert.equal(status.status.readyReplicas, 1);
  } finally {
    // Members stopped by the PIDs on record; the env's clean-up kills what is left.
    await env.run(['down', 'lite', '--force', '--wait', '5s']);
  }
});

test('etcd store: sealed documents, rotation to a new key, the old key removed, the cluster still read', { timeout: 480_000 }, async () => {
  // The store: a one-member control plane with mutual TLS, brought up with the SQLite store.
  const mgmtEnv = newEnv('127.28');
  ok(await mgmtEnv.run(['up', '--name', 'vault', '--replicas', '1', '--timeout', '120s']), 'up vault');
  const access = JSON.parse(ok(await mgmtEnv.run(['endpoints', 'vault', '-o', 'json']), 'endpoints').stdout) as ClientAccess;
  assert.ok(access.cacert !== undefined && access.cert !== undefined && access.key !== undefined);
  kv = openKvClient(access.endpoints, { credentials: readTlsCredentials({ caFile: access.cacert, certFile: access.cert, keyFile: access.key }) });
  const client = kv;
  const storeFlags = ['--store', 'etcd', '--etcd-endpoints', access.endpoints.join(','), '--etcd-cacert', access.cacert, '--etcd-cert', access.cert, '--etcd-key', access.key];

  const env = newEnv('127.29');
  const keyFile = join(keyDir, 'fleet.key');
  const [oldKey, newKey] = [randomBytes(32), randomBytes(32)];
  writeKeys(keyFile, [['fleet-1', oldKey]]);
  const cli = (args: string[]): Promise<CliRun> => env.run([...storeFlags, ...args], { FASTPLANE_SECRETS_KEY: keyFile });
  const documents = async (): Promise<Record<string, string>> => client.getAll().prefix('/fastplane/documents/').strings();

  try {
    ok(await cli(['up', '--name', 'app', '--replicas', '1', '--timeout', '120s']), 'up app');
    const everything = await client.getAll().prefix('').strings();
    assert.deepEqual(Object.entries(everything).flatMap(([key, value]) => pemIn(value).map((found) => `${key}: ${found}`)), [], 'no key in the store');
    const sealed = await documents();
    assert.ok(Object.keys(sealed).some((key) => key.includes('ca.key')), 'the CA key is among the documents');
    assert.deepEqual(Object.entries(sealed).filter(([, value]) => !value.startsWith('fastplane:enc:aesgcm:v1:fleet-1:')).map(([key]) => key), [], 'every document sealed with fleet-1');
    assert.equal(statusOf(ok(await cli(['status', 'app', '-o', 'json']), 'status').stdout).status.readyReplicas, 1);

    // A host without the key that sealed them: refused, naming the key, no stack trace.
    writeKeys(keyFile, [['fleet-2', newKey]]);
    const lacking = await cli(['status', 'app']);
    assert.equal(lacking.code, 2, lacking.stderr);
    assert.match(lacking.stderr, /^error: .*sealed with key fleet-1, which .*fleet\.key does not hold/m);
    assert.doesNotMatch(lacking.stderr, /\n\s+at /, 'no stack trace');

    // Rotation: the new key first, the old one still there; then the old one goes.
    writeKeys(keyFile, [['fleet-2', newKey], ['fleet-1', oldKey]]);
    const rotated = ok(await cli(['secrets', 'rotate', '-o', 'json']), 'secrets rotate');
    const rows = JSON.parse(rotated.stdout) as { name: string; done: boolean; documents: number; resealed: number }[];
    assert.deepEqual(rows, [{ name: 'app', done: true, documents: Object.keys(sealed).length, resealed: Object.keys(sealed).length }]);
    assert.match(rotated.stderr, /\[1\/1\] app: \d+ of \d+ documents sealed again/);
    assert.ok(Object.values(await documents()).every((value) => value.startsWith('fastplane:enc:aesgcm:v1:fleet-2:')), 'every document sealed with fleet-2');

    writeKeys(keyFile, [['fleet-2', newKey]]);
    const certs = JSON.parse(ok(await cli(['certs', 'app', '-o', 'json']), 'certs').stdout) as { file: string }[];
    assert.ok(certs.length > 0, 'the certificates read');
    assert.equal(statusOf(ok(await cli(['status', 'app', '-o', 'json']), 'status after rotation').stdout).status.readyReplicas, 1);
    assert.ok(Object.values(await documents()).every((value) => SEALED.test(value) && pemIn(value).length === 0));
  } finally {
    writeKeys(keyFile, [['fleet-2', newKey], ['fleet-1', oldKey]]);
    await cli(['down', 'app', '--force', '--wait', '5s']);
    await mgmtEnv.run(['down', 'vault', '--force', '--wait', '5s']);
  }
});

test('an http:// etcd store, or one without a client certificate, is refused (exit 2) unless --insecure-store', async () => {
  const env = newEnv('127.28');
  // Nothing listens there: the refusal comes before any connection.
  const http = await env.run(['--store', 'etcd', '--etcd-endpoints', 'http://127.28.250.1:2379', 'status']);
  assert.equal(http.code, 2, http.stderr);
  assert.match(http.stderr, /^error: --etcd-endpoints: http:\/\/127\.28\.250\.1:2379 is plain http.*or pass --insecure-store$/m);
  assert.match(http.stderr, /^error: --etcd-cert: required with --store etcd/m);
  assert.doesNotMatch(http.stderr, /\n\s+at /, 'no stack trace');
  const insecure = await env.run(['--store', 'etcd', '--etcd-endpoints', 'http://127.28.250.1:2379', '--insecure-store', 'status']);
  assert.equal(insecure.code, 1, 'with the flag it is tried, and found not answering');
  assert.match(insecure.stderr, /^error: etcd store unreachable at http:\/\/127\.28\.250\.1:2379/);
});

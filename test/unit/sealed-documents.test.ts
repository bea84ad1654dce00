import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { InvalidInputError } from '../../src/api/errors.ts';
import { resealScope, sealedDocuments } from '../../src/adapters/sealed-documents.ts';
import { loadKeyFile, parseKeyFile, type SealingKeys } from '../../src/adapters/sealing-keys.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import { DocumentConflictError } from '../../src/ports/state-store.ts';

const dir = mkdtempSync(join(tmpdir(), 'fastplane-sealing-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

const line = (name: string, key = randomBytes(32)): string => `${name}:${key.toString('base64')}`;
const keys = (...lines: string[]): SealingKeys => parseKeyFile(lines.join('\n'), 'secrets.key');
const PEM = '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIA==\n-----END PRIVATE KEY-----\n';

/** The problems of an input error, or a failure when the call did not throw one. */
function problemsOf(fn: () => unknown): string {
  try {
    fn();
  } catch (error) {
    if (error instanceof InvalidInputError) return error.problems.join('\n');
    throw error;
  }
  return assert.fail('no input error');
}

describe('sealing a value', () => {
  const old = line('old');
  const ring = keys(old);

  test('a sealed value names its format and key, holds nothing of the plain one, and opens to it', () => {
    const sealed = ring.seal('ssh/a/file/pki/ca.key', PEM);
    assert.match(sealed, /^fastplane:enc:aesgcm:v1:old:[A-Za-z0-9+/]+=*$/);
    assert.ok(!sealed.includes('PRIVATE KEY') && !sealed.includes(Buffer.from(PEM).toString('base64').slice(0, 16)));
    assert.notEqual(ring.seal('ssh/a/file/pki/ca.key', PEM), sealed, 'a fresh nonce every time');
    assert.equal(ring.open('ssh/a/file/pki/ca.key', sealed), PEM);
  });

  test('a changed byte, a sealed value moved to another document, or a renamed key does not open', () => {
    const sealed = ring.seal('c/file/pki/ca.key', PEM);
    const body = Buffer.from(sealed.slice('fastplane:enc:aesgcm:v1:old:'.length), 'base64');
    body[20] = (body[20] ?? 0) ^ 1;
    const tampered = `fastplane:enc:aesgcm:v1:old:${body.toString('base64')}`;
    assert.match(problemsOf(() => ring.open('c/file/pki/ca.key', tampered)), /c\/file\/pki\/ca\.key: does not open with key old of secrets\.key: the stored value was changed/);
    assert.match(problemsOf(() => ring.open('c/file/pki/client.key', sealed)), /does not open with key old/);
    const renamed = keys(line('other'), old);
    assert.match(problemsOf(() => renamed.open('c/file/pki/ca.key', sealed.replace(':old:', ':other:'))), /does not open with key other/);
  });

  test('a key of the same name but other bytes does not open; a key name the file lacks is named in the error', () => {
    const sealed = ring.seal('c/k', 'secret');
    assert.match(problemsOf(() => keys(line('old')).open('c/k', sealed)), /^c\/k: does not open with key old of secrets\.key/);
    assert.match(problemsOf(() => keys(line('new')).open('c/k', sealed)), /^c\/k: sealed with key old, which secrets\.key does not hold/);
  });

  test('a value stored before sealing (no prefix) reads as it is', () => {
    assert.equal(ring.open('c/record/x', '{"a":1}'), '{"a":1}');
    assert.equal(ring.isCurrent('{"a":1}'), false);
  });
});

describe('sealed documents in a store', () => {
  test('the store holds sealed values only; reads give the plain ones; claims and the rest pass through', async () => {
    const raw = new MemoryStateStore();
    const store = sealedDocuments(raw, keys(line('k1')));
    await store.putDocument('local-process/a', 'file/pki/ca.key', PEM);
    assert.match((await raw.getDocument('local-process/a', 'file/pki/ca.key')) ?? '', /^fastplane:enc:aesgcm:v1:k1:/);
    assert.equal(await store.getDocument('local-process/a', 'file/pki/ca.key'), PEM);
    assert.deepEqual(await store.listDocuments('local-process/a'), [{ key: 'file/pki/ca.key', value: PEM }]);
    assert.equal(await store.getDocument('local-process/a', 'none'), undefined);
    assert.equal(await store.claim('slots', '1', 'a'), true);
    assert.deepEqual(await raw.listClaims('slots'), [{ pool: 'slots', key: '1', owner: 'a' }]);
    await store.deleteDocument('local-process/a', 'file/pki/ca.key');
    assert.deepEqual(await raw.listDocuments('local-process/a'), []);
    // A generation of files goes in one batch: each of its values sealed too.
    await store.putDocuments('local-process/a', [{ key: 'file/pki/ca.key', value: PEM }, { key: 'files', value: '{}' }], []);
    for (const d of await raw.listDocuments('local-process/a')) assert.match(d.value, /^fastplane:enc:aesgcm:v1:k1:/, d.key);
    assert.equal(await store.getDocument('local-process/a', 'file/pki/ca.key'), PEM);
  });

  test('a conditional batch is judged on the opened value, and refused when the stored one changed', async () => {
    const raw = new MemoryStateStore();
    const store = sealedDocuments(raw, keys(line('k1')));
    await store.putDocuments('s', [{ key: 'files', value: 'generation 1' }], [], { key: 'files', value: undefined });
    await store.putDocuments('s', [{ key: 'files', value: 'generation 2' }], [], { key: 'files', value: 'generation 1' });
    await assert.rejects(store.putDocuments('s', [{ key: 'files', value: 'generation 2 too' }], [], { key: 'files', value: 'generation 1' }), DocumentConflictError);
    assert.equal(await store.getDocument('s', 'files'), 'generation 2');
  });

  test('a plain document written before is read, and sealed when it is next written', async () => {
    const raw = new MemoryStateStore();
    await raw.putDocument('s', 'file/pki/ca.key', PEM);
    const store = sealedDocuments(raw, keys(line('k1')));
    assert.equal(await store.getDocument('s', 'file/pki/ca.key'), PEM);
    await store.putDocument('s', 'file/pki/ca.key', PEM);
    assert.ok(!((await raw.getDocument('s', 'file/pki/ca.key')) ?? '').includes('PRIVATE KEY'));
  });

  test('rotation: with the new key first every document still opens; once resealed, the old key can go', async () => {
    const raw = new MemoryStateStore();
    const [oldLine, newLine] = [line('old'), line('new')];
    const before = sealedDocuments(raw, keys(oldLine));
    await before.putDocument('s', 'file/pki/ca.key', PEM);
    await before.putDocument('s', 'record/machine-1', '{"n":1}');
    await raw.putDocument('s', 'record/plain', '{"p":1}');

    const both = keys(newLine, oldLine);
    const during = sealedDocuments(raw, both);
    assert.equal(await during.getDocument('s', 'file/pki/ca.key'), PEM, 'the old key still opens');
    await during.putDocument('s', 'record/machine-1', '{"n":2}');
    assert.deepEqual(await resealScope(raw, both, 's'), { documents: 3, resealed: 2 }, 'the one written with the new key is left as it is');
    assert.deepEqual(await resealScope(raw, both, 's'), { documents: 3, resealed: 0 });

    const after = sealedDocuments(raw, keys(newLine));
    assert.deepEqual(await after.listDocuments('s'), [
      { key: 'file/pki/ca.key', value: PEM },
      { key: 'record/machine-1', value: '{"n":2}' },
      { key: 'record/plain', value: '{"p":1}' },
    ]);
    assert.ok((await raw.listDocuments('s')).every((d) => d.value.startsWith('fastplane:enc:aesgcm:v1:new:')));
  });
});

describe('the key file', () => {
  test('named keys, one a line, comments and blank lines ignored; the first seals', () => {
    const ring = parseKeyFile(`# keys\n\n${line('b')}\n${line('a')}\n`, 'f');
    assert.deepEqual(ring.keys.map((k) => k.name), ['b', 'a']);
    assert.equal(ring.current.name, 'b');
  });

  test('a bad line, a short key, a name twice or no key at all is an input error naming file and line', () => {
    assert.match(problemsOf(() => parseKeyFile('nocolon', 'f')), /^f:1: not name:key/);
    assert.match(problemsOf(() => parseKeyFile(`a:${randomBytes(16).toString('base64')}`, 'f')), /^f:1: key a is 16 bytes, not 32/);
    assert.match(problemsOf(() => parseKeyFile(`${line('a')}\n${line('a')}`, 'f')), /^f:2: key a is listed twice/);
    assert.match(problemsOf(() => parseKeyFile('# nothing\n', 'f')), /^f: holds no key/);
  });

  test("the state dir's file is made private with one key; a named file must exist and be private", () => {
    const made = join(dir, 'secrets.key');
    const ring = loadKeyFile(made, true);
    assert.equal(statSync(made).mode & 0o777, 0o600);
    assert.match(ring.current.name, /^key-\d{4}-\d\d-\d\d-[0-9a-f]{8}$/);
    assert.equal(loadKeyFile(made, true).current.name, ring.current.name, 'made once, then read');
    assert.match(problemsOf(() => loadKeyFile(join(dir, 'none.key'), false)), /none\.key: no such key file/);
    const open = join(dir, 'open.key');
    writeFileSync(open, readFileSync(made));
    chmodSync(open, 0o644);
    assert.match(problemsOf(() => loadKeyFile(open, false)), /open\.key: the key file may be read by others \(mode 644\); chmod 600 it/);
  });
});

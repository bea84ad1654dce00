import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { LocalProcessProvider } from '../../src/adapters/providers/local/local-process-provider.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import { StaleFenceError } from '../../src/ports/machine-provider.ts';

// A CA rotation's phase is a destructive provider call (its last phase drops a CA): a deposed lease
// holder's call, made after a newer holder advanced the rotation, is refused and changes no file.
// The cluster's CAs (etcd's and a Kubernetes control plane's) in a record store shared by two provider
// instances, as two fastplane processes would hold them; no process is started.

const CLUSTER = 'rotating';
const stateDir = mkdtempSync(join(tmpdir(), 'fastplane-ca-fence-'));
const store = new MemoryStateStore();
const provider = (): LocalProcessProvider => new LocalProcessProvider({ stateDir, addressPrefix: '127.62', store });

after(() => {
  rmSync(stateDir, { recursive: true, force: true });
});

test("a stale holder's advanceCaRotation is refused with StaleFenceError; the newer holder's rotation carries on", async () => {
  const holder = provider();
  // The admin kubeconfig makes the cluster's CAs, the Kubernetes ones too.
  await holder.kubeconfig(CLUSTER, '127.62.1.0');
  await holder.advanceCaRotation(CLUSTER, 'trust', 7);
  const caFiles = async (): Promise<string[]> => (await holder.certificateFiles(CLUSTER)).filter((file) => file.endsWith('ca.crt')).map((file) => readFileSync(file, 'utf8'));
  const trusted = await caFiles();
  assert.equal(trusted.length, 3, 'the etcd, Kubernetes and front-proxy CAs');
  for (const bundle of trusted) assert.equal(bundle.match(/BEGIN CERTIFICATE/g)?.length, 2, 'each trusts the old and the new CA');

  const deposed = provider();
  await assert.rejects(deposed.advanceCaRotation(CLUSTER, 'drop', 6), StaleFenceError);
  await assert.rejects(deposed.advanceCaRotation(CLUSTER, undefined, 6), /control plane rotating refused a call under lease fence 6/);
  assert.equal(await holder.caRotationPhase(CLUSTER), 'trust', 'the phase is the newer holder\'s');
  assert.deepEqual(await caFiles(), trusted, 'no CA file changed');

  await holder.advanceCaRotation(CLUSTER, 'reissue', 7);
  await holder.advanceCaRotation(CLUSTER, 'drop', 7);
  await holder.advanceCaRotation(CLUSTER, undefined, 7);
  assert.equal(await holder.caRotationPhase(CLUSTER), undefined);
  for (const bundle of await caFiles()) assert.equal(bundle.match(/BEGIN CERTIFICATE/g)?.length, 1, 'the new CA alone');
});

test('on an etcd-only cluster a rotation changes the etcd CA alone and makes no Kubernetes file', async () => {
  const holder = provider();
  await holder.renewClientCertificate('plain');
  const files = async (): Promise<string[]> => (await holder.certificateFiles('plain')).map((file) => file.split('/current/')[1] ?? file);
  const before = await files();
  for (const phase of ['trust', 'reissue', 'drop', undefined] as const) await holder.advanceCaRotation('plain', phase, 1);
  assert.deepEqual(await files(), before, 'the same files, none of them Kubernetes\'');
  const ca = (await holder.certificateFiles('plain')).find((file) => file.endsWith('pki/ca.crt')) ?? '';
  assert.equal(readFileSync(ca, 'utf8').match(/BEGIN CERTIFICATE/g)?.length, 1);
});

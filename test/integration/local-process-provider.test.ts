import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { after, test } from 'node:test';
import { InvalidInputError } from '../../src/api/errors.ts';
import { Etcd3Admin, openKvClient, readTlsCredentials } from '../../src/adapters/etcd/etcd3-admin.ts';
import { assertAddressFree } from '../../src/adapters/providers/local/local-machine.ts';
import { LocalProcessProvider } from '../../src/adapters/providers/local/local-process-provider.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import type { InfraProvider, MachineInfra } from '../../src/ports/machine-provider.ts';
import { isRunning } from '../support/cli.ts';

// The provider's default, mutual TLS; test/integration/tls.test.ts checks what TLS refuses.
const VERSION = '3.4.23';
const PREFIX = process.env.FASTPLANE_ADDRESS_PREFIX ?? '127.91';
const stateDirs: string[] = [];
const admins: Etcd3Admin[] = [];

/** An admin client with the cluster's client certificate (each cluster has its own CA). */
function adminFor(provider: LocalProcessProvider, cluster: string): Etcd3Admin {
  const tls = provider.clientTls(cluster)!;
  const admin = new Etcd3Admin({ callTimeoutMs: 2000, credentials: () => readTlsCredentials(tls) });
  admins.push(admin);
  return admin;
}

function newStateDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'fastplane-lpp-'));
  stateDirs.push(dir);
  return dir;
}

/** Every PID any machine of these state dirs ever recorded. */
function recordedPids(stateDir: string): number[] {
  const clusters = join(stateDir, 'clusters');
  if (!existsSync(clusters)) return [];
  // A cluster folder exists from its address claim on, before any machine folder.
  return readdirSync(clusters).flatMap((cluster) =>
    (existsSync(join(clusters, cluster, 'machines')) ? readdirSync(join(clusters, cluster, 'machines')) : []).flatMap((machine) => {
      const file = join(clusters, cluster, 'machines', machine, 'machine.json');
      if (!existsSync(file)) return [];
      const { pid } = JSON.parse(readFileSync(file, 'utf8')) as { pid?: number };
      return pid === undefined ? [] : [pid];
    }),
  );
}


after(async () => {
  for (const admin of admins) await admin.close();
  for (const dir of stateDirs) {
    for (const pid of recordedPids(dir)) {
      if (isRunning(pid)) process.kill(pid, 'SIGKILL');
    }
    rmSync(dir, { recursive: true, force: true });
  }
});

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe().catch(() => undefined);
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function waitProvisioned(provider: InfraProvider, cluster: string, name: string): Promise<MachineInfra> {
  return waitFor(`${name} provisioned`, async () => {
    const infra = await provider.describe(cluster, name);
    return infra?.state === 'Provisioned' ? infra : undefined;
  });
}

test('a machine is Provisioning until its provisioning delay has passed, then Provisioned', async () => {
  const provider = new LocalProcessProvider({ stateDir: newStateDir(), addressPrefix: PREFIX, provisioningDelay: { minMs: 1200, maxMs: 1200 } });
  const started = Date.now();
  const created = await provider.create({ cluster: 'delay', name: 'm1', ordinal: 1 });
  assert.equal(created.state, 'Provisioning');
  assert.ok(created.address.startsWith(`${PREFIX}.`) && created.address.endsWith('.1'), created.address);
  assert.equal(created.clientURL, `https://${created.address}:2379`);
  assert.equal(created.peerURL, `https://${created.address}:2380`);
  assert.equal(created.memberRunning, false);
  const provisioning = await provider.describe('delay', 'm1');
  assert.equal(provisioning?.state, 'Provisioning');
  // The hint the planner looks again at: the drawn delay from creation, and only while provisioning.
  const expected = provisioning.expectedReadyAt ?? 0;
  assert.ok(expected >= started + 1200 && expected <= Date.now() + 1200, `expectedReadyAt ${String(expected)} is 1200 ms after creation`);
  await assert.rejects(
    provider.startMember('delay', 'm1', { memberName: 'm1', version: VERSION, initialCluster: '', initialClusterState: 'new', clusterToken: 't', maxLearners: 1 }),
    /still provisioning/,
  );
  const ready = await waitProvisioned(provider, 'delay', 'm1');
  assert.ok(Date.now() - started >= 1200, 'not Provisioned before the delay');
  assert.ok(Date.now() >= expected, 'Provisioned no earlier than expected');
  assert.equal(ready.expectedReadyAt, undefined);
  // create is idempotent: the same machine, not a second one.
  assert.equal((await provider.create({ cluster: 'delay', name: 'm1', ordinal: 1 })).address, created.address);
});

test('a member started by a CLI process outlives it, answers, and leaves nothing behind after delete', async () => {
  const stateDir = newStateDir();
  const options = { stateDir, addressPrefix: PREFIX, deletionDelay: { minMs: 800, maxMs: 800 } };
  const provider = new LocalProcessProvider(options);
  const infra = await provider.create({ cluster: 'life', name: 'm2', ordinal: 2 });
  await waitProvisioned(provider, 'life', 'm2');

  // Start the member from a separate node process that exits at once, as `fastplane up` does.
  const providerModule = pathToFileURL(fileURLToPath(new URL('../../src/adapters/providers/local/local-process-provider.ts', import.meta.url))).href;
  const launch = { memberName: 'm2', version: VERSION, initialCluster: `m2=${infra.peerURL}`, initialClusterState: 'new', clusterToken: 'life', maxLearners: 1 };
  const script = `import { LocalProcessProvider } from ${JSON.stringify(providerModule)};
    await new LocalProcessProvider(${JSON.stringify(options)}).startMember('life', 'm2', ${JSON.stringify(launch)});`;
  execFileSync(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: 'inherit', timeout: 30_000 });

  const [pid] = recordedPids(stateDir);
  assert.ok(pid !== undefined && isRunning(pid), 'etcd runs after the starting process exited');
  const running = await provider.describe('life', 'm2');
  assert.equal(running?.memberRunning, true);
  assert.ok(running.memberStartedAt !== undefined);
  const status = await waitFor('etcd to answer', () => adminFor(provider, 'life').status(infra.clientURL));
  assert.equal(status.version, VERSION);
  assert.equal(status.leaderId, status.memberId);
  // What a learner's progress is judged by before it answers: the bytes of its data dir (its WAL at least).
  assert.ok(((await provider.describe('life', 'm2'))?.memberDataBytes ?? 0) > 0, 'a running member reports its data dir bytes');
  const kv = openKvClient([infra.clientURL], { credentials: readTlsCredentials(provider.clientTls('life')!) });
  try {
    await kv.put('/fastplane/probe').value('ok');
    assert.equal(await kv.get('/fastplane/probe').string(), 'ok');
  } finally {
    kv.close();
  }
  const machineDir = join(stateDir, 'clusters', 'life', 'machines', 'm2');
  assert.ok(existsSync(join(machineDir, 'data', 'member')), 'etcd data lives in the machine folder');
  assert.match(readFileSync(join(machineDir, 'etcd.log'), 'utf8'), /"level":"info"/, 'zap logs, no capnslog');

  await provider.delete('life', 'm2');
  assert.equal(isRunning(pid), false, 'delete stops the member at once');
  const deleting = await provider.describe('life', 'm2');
  assert.equal(deleting?.state, 'Deleting');
  assert.equal(deleting.memberRunning, false);
  // Describing never tears down: each delete moves the teardown on, and wipes the machine once due.
  await waitFor(
    'the machine to be gone',
    async () => {
      await provider.delete('life', 'm2');
      return (await provider.describe('life', 'm2')) === undefined ? true : undefined;
    },
    5000,
  );
  assert.equal(existsSync(machineDir), false, 'the machine folder is removed');
  await assertAddressFree(infra.address, 2379);
  await assertAddressFree(infra.address, 2380);
  await provider.stopMember('life', 'm2');
});

test('destroyCluster kills every member by PID and removes the cluster folder', async () => {
  const stateDir = newStateDir();
  const claims = new MemoryStateStore();
  const provider = new LocalProcessProvider({ stateDir, addressPrefix: PREFIX, store: claims });
  const infra = await provider.create({ cluster: 'gone', name: 'm3', ordinal: 3 });
  await waitProvisioned(provider, 'gone', 'm3');
  await provider.startMember('gone', 'm3', {
    memberName: 'm3', version: VERSION, initialCluster: `m3=${infra.peerURL}`, initialClusterState: 'new', clusterToken: 'gone', maxLearners: 1,
  });
  // Idempotent: a second start while it runs does nothing.
  const [pid] = recordedPids(stateDir);
  await provider.startMember('gone', 'm3', {
    memberName: 'm3', version: VERSION, initialCluster: `m3=${infra.peerURL}`, initialClusterState: 'new', clusterToken: 'gone', maxLearners: 1,
  });
  assert.deepEqual(recordedPids(stateDir), [pid]);
  await waitFor('etcd to answer', () => adminFor(provider, 'gone').status(infra.clientURL));
  await provider.destroyCluster('gone');
  assert.ok(pid !== undefined && !isRunning(pid));
  // Free the moment destroyCluster returns: the next cluster may be given the same addresses at once.
  await assertAddressFree(infra.address, 2379);
  await assertAddressFree(infra.address, 2380);
  assert.equal(existsSync(join(stateDir, 'clusters', 'gone')), false);
  assert.equal(await provider.describe('gone', 'm3'), undefined);
  assert.deepEqual(await claims.listClaims(`local-addresses/${PREFIX}`), [], 'its address slot is given back');
});

test('a taken address in the cluster\'s own block is an InvalidInputError naming the address and port', async () => {
  const provider = new LocalProcessProvider({ stateDir: newStateDir(), addressPrefix: PREFIX, store: new MemoryStateStore() });
  const first = await provider.create({ cluster: 'taken', name: 'm1', ordinal: 1 });
  const ninth = first.address.replace(/\.1$/, '.9');
  const blocker = createServer();
  blocker.listen({ host: ninth, port: 2380 });
  await once(blocker, 'listening');
  try {
    await assert.rejects(provider.create({ cluster: 'taken', name: 'm9', ordinal: 9 }), (error: unknown) => {
      assert.ok(error instanceof InvalidInputError);
      assert.ok(error.message.includes(`${ninth}:2380`), error.message);
      return true;
    });
    assert.equal(await provider.describe('taken', 'm9'), undefined, 'nothing is recorded for a refused machine');
    await assert.rejects(assertAddressFree(ninth, 2380), InvalidInputError);
    await assertAddressFree(ninth, 2379);
  } finally {
    await new Promise((resolve) => blocker.close(resolve));
  }
});

test('slots are claimed in the store: processes sharing it never share a block, and a block in use on the host is skipped', async () => {
  const shared = new MemoryStateStore();
  const one = new LocalProcessProvider({ stateDir: newStateDir(), addressPrefix: PREFIX, store: shared });
  const two = new LocalProcessProvider({ stateDir: newStateDir(), addressPrefix: PREFIX, store: shared });
  const [a, b] = await Promise.all([one.create({ cluster: 'slot-a', name: 'a1', ordinal: 1 }), two.create({ cluster: 'slot-b', name: 'b1', ordinal: 1 })]);
  assert.notEqual(a.address, b.address);
  const owners = (await shared.listClaims(`local-addresses/${PREFIX}`)).map((c) => c.owner).sort();
  assert.deepEqual(owners, ['slot-a', 'slot-b']);
  // A store that knows nothing of those claims (another state dir) still skips a block in use on the
  // host: the block a probe cluster got and gave back is free, until something listens in it.
  const probe = new LocalProcessProvider({ stateDir: newStateDir(), addressPrefix: PREFIX, store: new MemoryStateStore() });
  const block = (await probe.create({ cluster: 'probe', name: 'p1', ordinal: 1 })).address.replace(/\.1$/, '');
  assert.ok(![a.address, b.address].some((address) => address.startsWith(`${block}.`)), 'the probe got a block of its own');
  await probe.destroyCluster('probe');
  const blocker = createServer();
  blocker.listen({ host: `${block}.7`, port: 2379 });
  await once(blocker, 'listening');
  try {
    const other = new LocalProcessProvider({ stateDir: newStateDir(), addressPrefix: PREFIX, store: new MemoryStateStore() });
    const c = await other.create({ cluster: 'slot-c', name: 'c1', ordinal: 1 });
    assert.notEqual(c.address, `${block}.1`, 'a block with a listener is skipped');
    assert.ok(![a.address, b.address].includes(c.address));
  } finally {
    await new Promise((resolve) => blocker.close(resolve));
  }
  await one.destroyCluster('slot-a');
  assert.deepEqual((await shared.listClaims(`local-addresses/${PREFIX}`)).map((c) => c.owner), ['slot-b'], 'down gives the slot back');
});

test('bad names and ordinals are InvalidInputError', async () => {
  const provider = new LocalProcessProvider({ stateDir: newStateDir(), addressPrefix: PREFIX });
  await assert.rejects(provider.create({ cluster: '../x', name: 'm1', ordinal: 1 }), InvalidInputError);
  await assert.rejects(provider.create({ cluster: 'ok', name: 'm1', ordinal: 255 }), InvalidInputError);
});

test('a machine is out of reach, never gone, from another state dir sharing the store; the CA is shared through the store', async () => {
  const shared = new MemoryStateStore();
  const home = new LocalProcessProvider({ stateDir: newStateDir(), addressPrefix: PREFIX, store: shared });
  const elsewhere = new LocalProcessProvider({ stateDir: newStateDir(), addressPrefix: PREFIX, store: shared });
  const created = await home.create({ cluster: 'homes', name: 'h1', ordinal: 1 });
  try {
    const seen = await elsewhere.describe('homes', 'h1');
    assert.ok(seen, 'described, not taken for gone');
    assert.equal(seen.clientURL, created.clientURL);
    assert.match(seen.unreachable ?? '', /runs on host .* under state dir .*cannot reach its processes/);
    assert.deepEqual(await elsewhere.machineNames('homes'), ['h1']);
    await assert.rejects(elsewhere.delete('homes', 'h1'), /cannot reach its processes/, 'no action on a machine out of reach');
    await assert.rejects(elsewhere.stopMember('homes', 'h1'), /cannot reach its processes/);
    const [mine, theirs] = await Promise.all([home.loadClientTls('homes'), elsewhere.loadClientTls('homes')]);
    assert.ok(mine && theirs && mine.caFile !== theirs.caFile, 'each state dir has its own copy');
    assert.equal(readFileSync(theirs.caFile, 'utf8'), readFileSync(mine.caFile, 'utf8'), 'the same CA');
    assert.equal(readFileSync(theirs.certFile, 'utf8'), readFileSync(mine.certFile, 'utf8'), 'the same client certificate');
    assert.equal(await home.describe('homes', 'h1').then((m) => m?.unreachable), undefined, 'at home it is reachable');
  } finally {
    await home.destroyCluster('homes');
  }
  assert.equal(await elsewhere.describe('homes', 'h1'), undefined, 'gone once its home destroyed it');
  assert.deepEqual(await shared.listDocuments('local-process/homes'), [], 'nothing of the cluster left in the store');
});

test('a machine created under a deleted machine\'s name gets new certificates, not the deleted one\'s', async () => {
  const stateDir = newStateDir();
  const provider = new LocalProcessProvider({ stateDir, addressPrefix: PREFIX, store: new MemoryStateStore() });
  const serverCert = (): string => readFileSync(join(stateDir, 'clusters', 'reuse', 'machines', 'm4', 'pki', 'server.crt'), 'utf8');
  await provider.create({ cluster: 'reuse', name: 'm4', ordinal: 4 });
  const first = serverCert();
  await provider.delete('reuse', 'm4');
  assert.equal(await provider.describe('reuse', 'm4'), undefined);
  await provider.create({ cluster: 'reuse', name: 'm4', ordinal: 4 });
  assert.notEqual(serverCert(), first, 'a new key and certificate for the new machine');
  await provider.destroyCluster('reuse');
});

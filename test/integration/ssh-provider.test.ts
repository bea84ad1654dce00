import assert from 'node:assert/strict';
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import { join } from 'node:path';
import { findEtcdBinary } from '../../src/adapters/etcd/etcd-binaries.ts';
import { HOST_POOL, SshProvider } from '../../src/adapters/providers/ssh/ssh-provider.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import type { MemberLaunch } from '../../src/ports/machine-provider.ts';
import { CliEnv } from '../support/cli.ts';
import { NetLab, type LabInfo } from '../support/netlab.ts';

// The ssh provider against two hosts of the network lab: host keys, what it leaves on a host, and a
// host cut off from fastplane described as data (also while its machine provisions), and describe
// only reading: a machine waiting for its host moves on through provision.

const lab = new NetLab(62);
const env = new CliEnv('127.62');
let info: LabInfo;
const providers: SshProvider[] = [];

function provider(store: MemoryStateStore, knownHostsFile: string, hostIndexes = [1, 2], provisioningDelay?: { minMs: number; maxMs: number }): SshProvider {
  const made = new SshProvider({
    stateDir: env.stateDir,
    hosts: hostIndexes.map((i) => ({ address: info.hosts[i - 1]?.address ?? '', port: 22, user: 'root' })),
    identityFile: info.identityFile,
    knownHostsFile,
    baseDir: '/var/lib/fastplane',
    findBinary: findEtcdBinary,
    version: '3.4.23',
    store,
    stopGraceMs: 2_000,
    ...(provisioningDelay === undefined ? {} : { provisioningDelay }),
  });
  providers.push(made);
  return made;
}

const launch = (name: string, peerURL: string): MemberLaunch => ({
  memberName: name,
  version: '3.4.23',
  initialCluster: `${name}=${peerURL}`,
  initialClusterState: 'new',
  clusterToken: 'ssh-it',
  maxLearners: 1,
});

describe('ssh provider on lab hosts', { timeout: 300_000 }, () => {
  before(() => {
    info = lab.up(2);
  });
  after(async () => {
    await Promise.all(providers.map((p) => p.close()));
    lab.down();
    env.cleanup();
  });

  test('a host whose key is unknown, or changed, is refused with a message saying which', async () => {
    const store = new MemoryStateStore();
    const empty = join(env.stateDir, 'empty_known_hosts');
    writeFileSync(empty, '');
    const unknown = provider(store, empty, [1]);
    await assert.rejects(unknown.create({ cluster: 'keys', name: 'keys-1', ordinal: 1 }), /host key of 198\.18\.62\.11 is unknown: it is not in/);
    assert.equal((await unknown.describe('keys', 'keys-1'))?.state, 'Failed');
    await unknown.delete('keys', 'keys-1');
    assert.deepEqual(await store.listClaims(HOST_POOL), [], 'deleting the failed machine gave its host back');

    // Host 2's key written down for host 1: a changed key, as after a host was replaced or spoofed.
    const swapped = join(env.stateDir, 'swapped_known_hosts');
    const host2Key = readFileSync(info.knownHostsFile, 'utf8').split('\n').find((line) => line.startsWith(`${info.hosts[1]?.address ?? '-'} `)) ?? '';
    writeFileSync(swapped, `${host2Key.replace(info.hosts[1]?.address ?? '-', info.hosts[0]?.address ?? '-')}\n`);
    await assert.rejects(provider(store, swapped, [1]).create({ cluster: 'keys', name: 'keys-2', ordinal: 2 }), /host key of 198\.18\.62\.11 has CHANGED/);
  });

  test('a provisioning delay holds a machine before any host work, with its expected ready time; its facts give when it became ready', async () => {
    const store = new MemoryStateStore();
    const ssh = provider(store, info.knownHostsFile, [1], { minMs: 1500, maxMs: 1500 });
    const before = Date.now();
    const created = await ssh.create({ cluster: 'slow', name: 'slow-1', ordinal: 1 });
    assert.equal(created.state, 'Provisioning');
    const expected = created.expectedReadyAt ?? 0;
    assert.ok(expected >= before + 1500, 'it says when it expects to be ready');
    assert.deepEqual(await store.listClaims(HOST_POOL), [], 'no host claimed while the delay runs');
    assert.deepEqual(await ssh.machineFacts('slow'), [], 'no ready time before it is ready');
    assert.equal((await ssh.provision('slow', 'slow-1'))?.state, 'Provisioning', 'provision before the delay ends changes nothing');
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, expected - Date.now())));
    const ready = await ssh.provision('slow', 'slow-1');
    assert.equal(ready?.state, 'Provisioned');
    const facts = await ssh.machineFacts('slow');
    assert.equal(facts.length, 1);
    assert.ok(facts[0]!.readyAt >= expected && facts[0]!.readyAt <= Date.now(), 'ready at the end of the delay plus the host work');
    assert.equal(facts[0]!.clientURL, ready.clientURL);
    await ssh.delete('slow', 'slow-1');
  });

  test('create, start, describe (also cut off), stop and delete a member on a host', async () => {
    const store = new MemoryStateStore();
    const ssh = provider(store, info.knownHostsFile);
    const created = await ssh.create({ cluster: 'one', name: 'one-1', ordinal: 1 });
    assert.equal(created.state, 'Provisioned');
    const host = info.hosts.find((h) => h.address === created.address);
    assert.ok(host, `${created.address} is a lab host`);
    assert.equal(created.clientURL, `https://${host.address}:2379`);
    // Keys are private on the host; the binary is the one here, byte for byte.
    const pki = join(host.baseDir, 'clusters', 'one', 'one-1', 'pki');
    assert.equal(statSync(join(pki, 'server.key')).mode & 0o777, 0o600);
    assert.equal(statSync(pki).mode & 0o777, 0o700);
    const binary = join(host.baseDir, 'bin', 'etcd-3.4.23');
    assert.deepEqual(readFileSync(binary), readFileSync(findEtcdBinary('3.4.23')));
    assert.deepEqual(await store.listClaims(HOST_POOL), [{ pool: HOST_POOL, key: `${host.address}:22`, owner: 'one/one-1' }]);

    await ssh.startMember('one', 'one-1', launch('one-1', created.peerURL));
    const running = await ssh.describe('one', 'one-1');
    assert.equal(running?.memberRunning, true);
    assert.ok(running.memberStartedAt !== undefined);
    assert.equal(running.unreachable, undefined);

    // Cut off from fastplane: not an exception, and not "stopped" either.
    lab.partition(['fp'], [host.index]);
    try {
      const cut = await ssh.describe('one', 'one-1');
      assert.match(cut?.unreachable ?? '', /ssh root@198\.18\.62\.1\d:22/);
      assert.equal(cut?.memberRunning, true, 'what was last seen');
      assert.equal(cut.state, 'Provisioned');
    } finally {
      lab.heal();
    }
    assert.equal((await ssh.describe('one', 'one-1'))?.unreachable, undefined);

    await ssh.stopMember('one', 'one-1');
    assert.equal((await ssh.describe('one', 'one-1'))?.memberRunning, false);
    await ssh.delete('one', 'one-1');
    assert.equal(await ssh.describe('one', 'one-1'), undefined);
    assert.ok(!existsSync(join(host.baseDir, 'clusters', 'one', 'one-1')), 'the member is wiped from the host');
    assert.deepEqual(await store.listClaims(HOST_POOL), []);

    // A new machine on the same host finds the binary there and leaves it as it is.
    const before = statSync(binary).mtimeMs;
    const again = await provider(store, info.knownHostsFile, [host.index]).create({ cluster: 'one', name: 'one-2', ordinal: 2 });
    assert.equal(again.address, host.address);
    assert.equal(statSync(binary).mtimeMs, before);
  });

  test('a machine whose host does not answer waits in Provisioning, and is provisioned after the heal', async () => {
    const store = new MemoryStateStore();
    const ssh = provider(store, info.knownHostsFile, [2]);
    lab.partition(['fp'], [2]);
    try {
      const waiting = await ssh.create({ cluster: 'cut', name: 'cut-1', ordinal: 1 });
      assert.equal(waiting.state, 'Provisioning');
      assert.match(waiting.failureMessage ?? '', /^waiting for its host to answer: ssh root@198\.18\.62\.12:22/);
      assert.equal((await ssh.describe('cut', 'cut-1'))?.state, 'Provisioning', 'still waiting, not Failed');
      assert.match((await ssh.provision('cut', 'cut-1'))?.failureMessage ?? '', /^waiting for its host to answer/);
    } finally {
      lab.heal();
    }
    // Describing only reads: the machine moves on when it is provisioned, not when it is looked at.
    const looked = await ssh.describe('cut', 'cut-1');
    assert.equal(looked?.state, 'Provisioning');
    assert.match(looked.failureMessage ?? '', /^waiting for its host to answer/, 'what it waits for is on record');
    assert.ok(!existsSync(join(info.hosts[1]?.baseDir ?? '-', 'clusters', 'cut')), 'nothing written to the host by describing');
    const healed = await ssh.provision('cut', 'cut-1');
    assert.equal(healed?.state, 'Provisioned');
    assert.equal(healed.address, info.hosts[1]?.address);
    await ssh.delete('cut', 'cut-1');
    assert.deepEqual(await store.listClaims(HOST_POOL), []);
  });
});

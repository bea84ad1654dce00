import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, test } from 'node:test';
import { LocalProcessProvider } from '../../src/adapters/providers/local/local-process-provider.ts';
import { isProcessAlive } from '../../src/adapters/host/process-status.ts';
import type { ComponentHealth, MachineComponent, MemberLaunch } from '../../src/ports/machine-provider.ts';

// A machine's etcd component against a real etcd process on loopback: start, health, version, stop.
const PREFIX = '127.140';
const VERSION = '3.5.16';
const clusters: { provider: LocalProcessProvider; cluster: string }[] = [];
const dirs: string[] = [];

after(async () => {
  // destroyCluster stops every member by its PID.
  for (const { provider, cluster } of clusters) await provider.destroyCluster(cluster);
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

function newProvider(cluster: string, insecure: boolean): { provider: LocalProcessProvider; stateDir: string } {
  const stateDir = mkdtempSync(join(tmpdir(), 'fastplane-components-'));
  dirs.push(stateDir);
  const provider = new LocalProcessProvider({ stateDir, addressPrefix: PREFIX, stopGraceMs: 1000, insecure });
  clusters.push({ provider, cluster });
  return { provider, stateDir };
}

function launchOf(name: string, peerURL: string): MemberLaunch {
  return { memberName: name, version: VERSION, initialCluster: `${name}=${peerURL}`, initialClusterState: 'new', clusterToken: 'components', maxLearners: 1 };
}

/** The health the component reports once it says healthy; fails after the deadline with the last answer. */
async function healthyWithin(etcd: MachineComponent<'etcd'>, timeoutMs: number): Promise<ComponentHealth> {
  const deadline = Date.now() + timeoutMs;
  let health = await etcd.health();
  while (!health.healthy && Date.now() < deadline) {
    await sleep(100);
    health = await etcd.health();
  }
  assert.equal(health.healthy, true, `not healthy within ${String(timeoutMs)} ms: ${health.reason ?? ''}`);
  return health;
}

function recordedPid(stateDir: string, cluster: string, name: string): number {
  const file = join(stateDir, 'clusters', cluster, 'machines', name, 'machine.json');
  const { pid } = JSON.parse(readFileSync(file, 'utf8')) as { pid?: number };
  assert.ok(pid !== undefined, 'the started member has a PID on record');
  return pid;
}

for (const insecure of [false, true]) {
  const cluster = insecure ? 'plain' : 'mtls';
  // Each provider has its own store, so both claim the same cluster slot: the ordinals keep the addresses apart.
  const ordinal = insecure ? 2 : 1;
  test(`a machine's etcd component starts, reports health and version, and stops (${insecure ? 'http' : 'mutual TLS'})`, async () => {
    const { provider, stateDir } = newProvider(cluster, insecure);
    const machine = await provider.create({ cluster, name: 'm1', ordinal });
    const { etcd } = provider.components(cluster, 'm1');
    assert.equal(etcd.kind, 'etcd');

    assert.deepEqual(await etcd.health(), { running: false, healthy: false, reason: 'its process is not running' });
    assert.equal(await etcd.version(), undefined);

    await etcd.start(launchOf('m1', machine.peerURL));
    const pid = recordedPid(stateDir, cluster, 'm1');
    assert.deepEqual(await healthyWithin(etcd, 20_000), { running: true, healthy: true });
    assert.equal(await etcd.version(), VERSION);

    // Starting what runs leaves it running: the same process, not a second one.
    await provider.startMember(cluster, 'm1', launchOf('m1', machine.peerURL));
    assert.equal(recordedPid(stateDir, cluster, 'm1'), pid);
    assert.equal((await provider.describe(cluster, 'm1'))?.memberRunning, true);

    await etcd.stop();
    assert.equal(isProcessAlive(pid), false);
    assert.deepEqual(await etcd.health(), { running: false, healthy: false, reason: 'its process is not running' });
    assert.equal(await etcd.version(), undefined);
    assert.equal((await provider.describe(cluster, 'm1'))?.memberRunning, false);
  });
}

test("a machine that does not exist has an etcd component that is not running, and cannot be started", async () => {
  const { provider } = newProvider('none', false);
  const { etcd } = provider.components('none', 'ghost');
  assert.deepEqual(await etcd.health(), { running: false, healthy: false, reason: 'its process is not running' });
  assert.equal(await etcd.version(), undefined);
  await assert.rejects(etcd.start(launchOf('ghost', 'https://127.140.0.1:2380')), /machine none\/ghost does not exist/);
});

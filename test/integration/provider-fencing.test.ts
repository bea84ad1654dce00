import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { defaultControlPlane } from '../../src/api/control-plane.ts';
import { LocalProcessProvider } from '../../src/adapters/providers/local/local-process-provider.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import { execute } from '../../src/executor/execute.ts';
import { LeaseKeeper } from '../../src/lease/lease-keeper.ts';
import type { Decision } from '../../src/planner/types.ts';
import { systemClock } from '../../src/ports/clock.ts';
import { StaleFenceError, type InfraProvider, type MemberLaunch } from '../../src/ports/machine-provider.ts';
import { observed } from '../support/observed.ts';
import { isRunning } from '../support/cli.ts';

// A deposed lease holder's provider calls, still in flight when a new holder took over, are refused
// by the machine itself (its cluster's fence on the host), and nothing the new holder made changes:
// local machines, real etcd processes, real leases in one store shared by two holders.

const PREFIX = '127.44';
const CLUSTER = 'fenced';
const stateDir = mkdtempSync(join(tmpdir(), 'fastplane-fence-'));
const store = new MemoryStateStore();
const keepers: LeaseKeeper[] = [];

/** Two provider instances on one state dir and store: the deposed holder's process and the new one's. */
const provider = (): LocalProcessProvider => new LocalProcessProvider({ stateDir, addressPrefix: PREFIX, store });

function pidOf(name: string): number | undefined {
  const file = join(stateDir, 'clusters', CLUSTER, 'machines', name, 'machine.json');
  return existsSync(file) ? (JSON.parse(readFileSync(file, 'utf8')) as { pid?: number }).pid : undefined;
}


after(async () => {
  await Promise.all(keepers.map((k) => k.release()));
  for (const pid of [pidOf('fenced-1'), pidOf('fenced-3')]) if (isRunning(pid)) process.kill(pid ?? 0, 'SIGKILL');
  rmSync(stateDir, { recursive: true, force: true });
});

const launch = (peerURL: string, name = 'fenced-1'): MemberLaunch => ({ memberName: name, version: '3.4.23', initialCluster: `${name}=${peerURL}`, initialClusterState: 'new', clusterToken: 'fence-it', maxLearners: 1 });

/** Until the process's /proc status says `holds` (a field of it, say). */
async function statusUntil(pid: number, holds: (field: (name: string) => string) => boolean): Promise<void> {
  for (;;) {
    const status = readFileSync(`/proc/${String(pid)}/status`, 'utf8');
    if (holds((name) => new RegExp(`^${name}:\\s*(.*)$`, 'm').exec(status)?.[1] ?? '')) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Frozen: stopped by SIGSTOP (the stop takes effect when the kernel next schedules it; a signal sent before could be handled first). */
const frozen = (pid: number) => statusUntil(pid, (field) => field('State').startsWith('T'));
/** A SIGTERM waits, pending, on the frozen process: it is held until the process runs again. */
const termPending = (pid: number) => statusUntil(pid, (field) => (BigInt(`0x${field('ShdPnd') || '0'}`) & (1n << 14n)) !== 0n);

/** Polls until the member answers healthy (a start returns once etcd is spawned, not ready). */
async function healthy(on: LocalProcessProvider, name: string): Promise<void> {
  for (;;) {
    if ((await on.components(CLUSTER, name).etcd.health()).healthy) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function take(force: boolean): Promise<LeaseKeeper> {
  const keeper = await LeaseKeeper.acquire(store, CLUSTER, { clock: systemClock, force });
  assert.ok(keeper, 'the lease was taken');
  keepers.push(keeper);
  return keeper;
}

test('every new holder of a lease gets a higher fence, and a renewal keeps it', async () => {
  const first = await take(false);
  const second = await take(true);
  assert.ok(first.writer.fence !== undefined && second.writer.fence !== undefined, 'the store numbered both holdings');
  assert.ok(second.writer.fence > first.writer.fence, `${String(second.writer.fence)} > ${String(first.writer.fence)}`);
  assert.ok(await second.renewNow());
  assert.equal((await store.getLease(CLUSTER))?.fence, second.writer.fence);
  await second.release();
  const third = await take(false);
  assert.ok((third.writer.fence ?? 0) > second.writer.fence, 'a lease released and taken again is numbered anew');
  await third.release();
});

test('a deposed holder\'s stop, delete, start, create, renewal and teardown are refused by the machine, which stays as the new holder left it', async () => {
  const deposed = await take(false);
  const holder = await take(true);
  const stale = deposed.writer.fence;
  const fence = holder.writer.fence;
  const mine = provider();
  const created = await mine.create({ cluster: CLUSTER, name: 'fenced-1', ordinal: 1, fence });
  await mine.startMember(CLUSTER, 'fenced-1', launch(created.peerURL), fence);
  await healthy(mine, 'fenced-1');
  const pid = pidOf('fenced-1');
  assert.ok(isRunning(pid), 'the new holder\'s member runs');
  const before = await mine.describe(CLUSTER, 'fenced-1');
  const certificates = async (): Promise<string[]> => (await mine.certificateFiles(CLUSTER)).map((file) => readFileSync(file, 'utf8'));
  const issued = await certificates();

  const late = provider();
  await assert.rejects(late.stopMember(CLUSTER, 'fenced-1', stale), StaleFenceError);
  await assert.rejects(late.delete(CLUSTER, 'fenced-1', stale), StaleFenceError);
  await assert.rejects(late.startMember(CLUSTER, 'fenced-1', { ...launch(created.peerURL), initialClusterState: 'existing' }, stale), StaleFenceError);
  await assert.rejects(late.create({ cluster: CLUSTER, name: 'fenced-2', ordinal: 2, fence: stale }), /machine fenced\/fenced-2 refused a call under lease fence/);
  await assert.rejects(late.destroyCluster(CLUSTER, stale), /control plane fenced refused/);
  await assert.rejects(late.renewMemberCertificates(CLUSTER, 'fenced-1', stale), StaleFenceError);
  assert.deepEqual(await certificates(), issued, 'no certificate re-issued');

  assert.ok(isRunning(pid), 'the member still runs, the same process');
  assert.equal(pidOf('fenced-1'), pid);
  assert.deepEqual(await mine.describe(CLUSTER, 'fenced-1'), before, 'the machine is as the new holder left it');
  assert.ok(existsSync(join(stateDir, 'clusters', CLUSTER, 'machines', 'fenced-1', 'data')), 'its data dir is there');
  assert.equal(await mine.describe(CLUSTER, 'fenced-2'), undefined, 'no machine created');
  assert.deepEqual(await mine.machineNames(CLUSTER), ['fenced-1']);
  assert.ok((await mine.components(CLUSTER, 'fenced-1').etcd.health()).healthy, 'it answers healthy');
  await deposed.release();
  await holder.release();
});

test('the executor ends the run on a refusal: its lease counts as lost, and its later side effects never run', async () => {
  await store.applySpec(defaultControlPlane(CLUSTER), Date.now());
  const deposed = await take(true);
  let called!: () => void;
  const inFlight = new Promise<void>((resolve) => (called = resolve));
  let resume!: () => void;
  const resumed = new Promise<void>((resolve) => (resume = resolve));
  const real = provider();
  // The deposed holder's deletion is slow: it is past every check of the lease when the new holder takes over.
  const slow: InfraProvider = Object.assign(Object.create(real) as LocalProcessProvider, {
    delete: async (cluster: string, name: string, fence?: number) => {
      called();
      await resumed;
      return real.delete(cluster, name, fence);
    },
  });
  const decision: Decision = { machineActions: [{ kind: 'DeleteMachine', machine: 'fenced-1', reason: 'ScaleDown' }], waits: [], conditions: [], requeueAfterMs: 0, converged: false, phases: {} };
  const deps = { cluster: CLUSTER, etcd: undefined as never, provider: slow, store, writer: deposed.writer, clock: systemClock, failpoint: () => undefined };
  const running = execute(deps, observed(), decision);
  await inFlight;
  const holder = await take(true);
  const mine = provider();
  // The new holder acts on the machine: its start (the member already runs) raises the host's fence.
  await mine.startMember(CLUSTER, 'fenced-1', { ...launch((await mine.describe(CLUSTER, 'fenced-1'))?.peerURL ?? ''), initialClusterState: 'existing' }, holder.writer.fence);
  const pid = pidOf('fenced-1');
  resume();
  await assert.rejects(running, StaleFenceError);
  assert.ok(deposed.writer.lost, 'the deposed writer counts its lease as lost');
  assert.throws(() => {
    deposed.writer.ensureHeld();
  }, StaleFenceError);
  assert.ok(isRunning(pid), 'the member still runs');
  assert.equal((await mine.describe(CLUSTER, 'fenced-1'))?.state, 'Provisioned', 'the machine is not being deleted');
  await mine.delete(CLUSTER, 'fenced-1', holder.writer.fence);
  assert.equal(await mine.describe(CLUSTER, 'fenced-1'), undefined, 'the holder itself may delete it');
  assert.ok(!isRunning(pid));
});

test('a deposed holder\'s stop let through before a newer holder came ends before the newer holder acts: never after it', async () => {
  const deposed = await take(true);
  // The deposed holder's provider gives a member 3 s to exit before SIGKILL.
  const late = new LocalProcessProvider({ stateDir, addressPrefix: PREFIX, store, stopGraceMs: 3000 });
  const created = await late.create({ cluster: CLUSTER, name: 'fenced-3', ordinal: 3, fence: deposed.writer.fence });
  await late.startMember(CLUSTER, 'fenced-3', launch(created.peerURL, 'fenced-3'), deposed.writer.fence);
  await healthy(late, 'fenced-3');
  const first = pidOf('fenced-3') ?? 0;
  // The member freezes (a host under load): the deposed holder's stop passes the fence and its SIGTERM waits.
  process.kill(first, 'SIGSTOP');
  await frozen(first);
  const stopping = late.stopMember(CLUSTER, 'fenced-3', deposed.writer.fence);
  await termPending(first);
  // A new holder takes over and starts the member while that stop is still under way.
  const holder = await take(true);
  const mine = provider();
  await mine.startMember(CLUSTER, 'fenced-3', { ...launch(created.peerURL, 'fenced-3'), initialClusterState: 'existing' }, holder.writer.fence);
  await stopping;
  const pid = pidOf('fenced-3');
  assert.ok(!isRunning(first), 'the deposed holder\'s stop ended (SIGKILL after its grace)');
  assert.ok(isRunning(pid), 'the member runs after both calls: the newer start came after the older stop, not before it');
  assert.notEqual(pid, first, 'a process the newer holder started');
  await healthy(mine, 'fenced-3');
  await assert.rejects(late.delete(CLUSTER, 'fenced-3', deposed.writer.fence), StaleFenceError, 'the deposed holder\'s next call is refused');
  await mine.delete(CLUSTER, 'fenced-3', holder.writer.fence);
  assert.ok(!isRunning(pid));
});

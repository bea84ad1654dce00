import assert from 'node:assert/strict';
import { existsSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { cliEnvFactory, pidsUnder, statusOf } from '../support/cli.ts';
import { askEtcd, kvClientFor } from '../support/etcd-direct.ts';
import { leaveBehind } from '../support/lagging-member.ts';

const newEnv = cliEnvFactory();
const env = newEnv('127.231');
const NAME = 'rec';
const KEYS = 500;

function machineDir(machine: string): string {
  return join(env.stateDir, 'clusters', NAME, 'machines', machine);
}

/** What a refused recover must leave as it was: records, member processes. */
function stateSnapshot(): string {
  return JSON.stringify({
    machines: env.machines(NAME).map((m) => ({ name: m.name, failed: m.failed, deleteRequested: m.deleteRequested })),
    initMachine: env.controlPlaneRecords()[0]?.initMachine,
    processes: pidsUnder(env.stateDir).sort(),
  });
}

describe('recover from a lost majority on real etcd', { timeout: 600_000 }, () => {
  after(() => {
    env.cleanup();
  });
  let doc: ControlPlaneStatusDocument;
  const written = new Map<string, string>();

  test('recover on a healthy cluster is bad input (exit 2) and changes nothing', async () => {
    const up = await env.run(['up', '--name', NAME, '--replicas', '3', '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    doc = statusOf(up.stdout);
    const client = kvClientFor(doc.status);
    try {
      for (let i = 0; i < KEYS; i++) {
        const key = `/data/${String(i).padStart(4, '0')}`;
        await client.put(key).value(`v${String(i)}`);
        written.set(key, `v${String(i)}`);
      }
    } finally {
      client.close();
    }
    // A reconcile pass records the highest raft index it observes: what recover compares against.
    const again = await env.run(['up', '--name', NAME, '--replicas', '3', '--timeout', '60s']);
    assert.equal(again.code, 0, again.stderr);
    assert.ok((env.controlPlaneRecords()[0]?.highestRaftIndex ?? 0) >= KEYS, 'highest raft index recorded');
    const before = stateSnapshot();
    const healthy = await env.run(['recover', NAME]);
    assert.equal(healthy.code, 2, healthy.stderr);
    assert.match(healthy.stderr, /has quorum \(3 of 3 voters healthy\): nothing to recover/);
    assert.equal(stateSnapshot(), before);
  });

  test('after SIGKILL of 2 of 3 members and loss of their data dirs: recover prints the plan and exits 3 without --yes, converges to 3 voters with every key with --yes', async () => {
    const init = env.controlPlaneRecords()[0]?.initMachine;
    assert.ok(init !== undefined);
    const lost = env.machines(NAME).map((m) => m.name).filter((name) => name !== init);
    assert.equal(lost.length, 2);
    for (const machine of lost) {
      for (const pid of pidsUnder(machineDir(machine))) process.kill(pid, 'SIGKILL');
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
    for (const machine of lost) rmSync(join(machineDir(machine), 'data'), { recursive: true, force: true });

    const explained = await env.run(['status', NAME, '--explain']);
    assert.equal(explained.code, 0, explained.stderr);
    assert.match(explained.stdout, /QuorumLost/);
    assert.match(explained.stdout, new RegExp(`fastplane recover ${NAME}`));
    assert.match(explained.stdout, /no backup of rec exists/);

    const before = stateSnapshot();
    const dry = await env.run(['recover', NAME]);
    assert.equal(dry.code, 3, dry.stderr);
    assert.match(dry.stdout, new RegExp(`${init}\\s+member \\d+\\s+committed index \\d+ \\(data dir\\)\\s+running`));
    assert.match(dry.stdout, new RegExp(`chosen: ${init} at committed index \\d+, the only voter with a reading`));
    assert.match(dry.stdout, new RegExp(`not read \\(no data dir here, no answer\\): ${lost.join(', ')}`));
    assert.match(dry.stdout, new RegExp(`restart ${init} once with --force-new-cluster`));
    assert.match(dry.stdout, new RegExp(`delete ${lost.join(', ')}`));
    assert.match(dry.stderr, /nothing changed: run fastplane recover rec --yes/);
    assert.equal(stateSnapshot(), before, 'without --yes nothing changes');

    const run = await env.run(['recover', NAME, '--yes', '--timeout', '240s']);
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stdout, /nothing observed was lost: survivor/);
    assert.match(run.stdout, /recovery of rec: Converged/);

    const names = env.machines(NAME).map((m) => m.name);
    assert.equal(names.length, 3);
    for (const machine of lost) assert.ok(env.wasDeleted(NAME, machine), `${machine} deleted`);
    const status = await env.run(['status', NAME, '-o', 'json']);
    const { members, statuses } = await askEtcd(statusOf(status.stdout).status);
    assert.equal(members.filter((m) => !m.isLearner).length, 3, 'three voters');
    assert.equal(statuses.length, 3);
    const client = kvClientFor(statusOf(status.stdout).status);
    try {
      const now = await client.getAll().prefix('/data/').strings();
      const missing = [...written].filter(([key, value]) => now[key] !== value).length;
      console.log(`acknowledged writes missing after recover: ${String(missing)} of ${String(written.size)}`);
      assert.equal(missing, 0, 'acknowledged writes missing: the survivor was caught up');
    } finally {
      client.close();
    }
    const forced = env.events(NAME).filter((e) => e.action === 'ForceNewCluster');
    assert.equal(forced.length, 1);
  });
});

describe('recover picks the most up-to-date data dir, stopped or not, on real etcd', { timeout: 600_000 }, () => {
  const lagEnv = newEnv('127.233');
  after(() => {
    lagEnv.cleanup();
  });

  test('member 3 paused while keys are written, members 1 and 2 SIGKILLed, 3 resumed: recover names 1 or 2 (not the lagging 3), restarts 1 and 2 from their data dirs, forces nothing, and every acknowledged key is there', async () => {
    const up = await lagEnv.run(['up', '--name', 'lag', '--replicas', '3', '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const doc = statusOf(up.stdout);
    const machines = lagEnv.machines('lag');
    assert.equal(machines.length, 3);
    const [first, second, third] = machines.map((m) => m.name);
    assert.ok(first !== undefined && second !== undefined && third !== undefined);
    const pidsOf = (machine: string): number[] => pidsUnder(join(lagEnv.stateDir, 'clusters', 'lag', 'machines', machine));
    const acknowledged = await leaveBehind(doc, machines, pidsOf, { lagging: third, ahead: [first, second], prefix: '/lag/', count: 600 });

    const dry = await lagEnv.run(['recover', 'lag']);
    assert.equal(dry.code, 3, `${dry.stdout}\n${dry.stderr}`);
    const chosen = /chosen: (\S+) at committed index (\d+)/.exec(dry.stdout);
    assert.ok(chosen, dry.stdout);
    assert.ok(chosen[1] === first || chosen[1] === second, `a member with the newest data dir is chosen, not the lagging ${third}:\n${dry.stdout}`);
    const lagging = new RegExp(`${third}\\s+member \\d+\\s+committed index (\\d+) \\(data dir\\)\\s+running`).exec(dry.stdout);
    assert.ok(lagging, dry.stdout);
    assert.ok(Number(lagging[1]) < Number(chosen[2]), `the paused member lags:\n${dry.stdout}`);
    assert.match(dry.stdout, new RegExp(`${chosen[1] === first ? second : first}\\s+member \\d+\\s+committed index \\d+ \\(data dir\\)\\s+stopped`));

    assert.match(dry.stdout, new RegExp(`1\\. restart (${first}, ${second}|${second}, ${first}) from their data dirs as they were`), dry.stdout);

    const run = await lagEnv.run(['recover', 'lag', '--yes', '--timeout', '240s']);
    assert.equal(run.code, 0, `${run.stdout}\n${run.stderr}`);
    assert.match(run.stdout, /quorum is back: .* restarted from their data dirs, nothing forced/);
    assert.match(run.stdout, /recovery of lag: Converged/);
    assert.ok(!lagEnv.events('lag').some((e) => e.action === 'ForceNewCluster'), 'nothing forced');
    const status = await lagEnv.run(['status', 'lag', '-o', 'json']);
    const after = statusOf(status.stdout);
    const { members } = await askEtcd(after.status);
    assert.equal(members.filter((m) => !m.isLearner).length, 3, 'three voters');
    assert.deepEqual(members.map((m) => m.name).sort(), [first, second, third].sort(), 'the same three members');
    const reader = kvClientFor(after.status);
    try {
      const stored = await reader.getAll().prefix('/lag/').keys();
      const missing = acknowledged.filter((key) => !stored.includes(key));
      assert.deepEqual(missing, [], `every one of the ${String(acknowledged.length)} acknowledged keys is there`);
    } finally {
      reader.close();
    }
  });
});

describe('an init member that never starts, on real etcd', { timeout: 300_000 }, () => {
  const nvEnv = newEnv('127.232');
  after(() => {
    nvEnv.cleanup();
  });

  test('the init machine is deleted after learnerStuckAfter, its init abandoned, and another machine initializes the cluster: 3 voters', async () => {
    const clusterDir = join(nvEnv.stateDir, 'clusters', 'nv');
    mkdirSync(clusterDir, { recursive: true });
    // Test hook: the first member that would bootstrap behaves as an etcd that exits at once, always.
    writeFileSync(join(clusterDir, 'init-never-starts'), '');
    const manifest = nvEnv.writeManifest('nv', { replicas: 3, remediation: { learnerStuckAfter: '8s' } });
    const up = await nvEnv.run(['up', '-f', manifest, '--timeout', '180s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const cp = nvEnv.controlPlaneRecords()[0];
    assert.ok(cp);
    const abandoned = cp.abandonedInits ?? [];
    assert.equal(abandoned.length, 1, 'one init abandoned');
    const [first] = abandoned;
    assert.ok(first !== undefined && cp.initMachine !== undefined && cp.initMachine !== first);
    assert.ok(existsSync(join(clusterDir, `init-never-starts.${first}`)), 'the hook held back that machine');
    assert.ok(nvEnv.wasDeleted('nv', first), 'the abandoned init machine is deleted');
    // Its folder and data dir went with it, unless a later machine took the freed name.
    if (!nvEnv.machines('nv').some((m) => m.name === first)) assert.ok(!existsSync(join(clusterDir, 'machines', first)), 'with its folder and data dir');
    const events = nvEnv.events('nv');
    const order = (action: string, machine: string): number => events.findIndex((e) => e.action === action && e.machine === machine && e.outcome === 'Succeeded');
    assert.ok(order('MarkMachineFailed', first) >= 0 && order('MarkMachineFailed', first) < order('AbandonInit', first));
    assert.ok(order('AbandonInit', first) < order('InitCluster', cp.initMachine), 'the next init is recorded after the abandon');
    const { members } = await askEtcd(statusOf(up.stdout).status);
    assert.equal(members.filter((m) => !m.isLearner).length, 3);
  });
});

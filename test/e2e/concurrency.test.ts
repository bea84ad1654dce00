import assert from 'node:assert/strict';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import Database from 'better-sqlite3';
import type { EventEntry } from '../../src/cli/commands/events.ts';
import { cliEnvFactory, pidsUnder, statusOf, type CliEnv, type CliRun } from '../support/cli.ts';
import { askEtcd, kvClientFor, type ClusterAccess } from '../support/etcd-direct.ts';

const newEnv = cliEnvFactory();
const MEMBERSHIP = new Set(['InitCluster', 'AddLearner', 'StartMember', 'PromoteLearner', 'MoveLeader', 'RemoveMember']);

/** Waits until `check` returns a value, polling; fails after `ms`. */
async function waitFor<T>(what: string, check: () => T | undefined, ms = 60_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

function generationOf(env: CliEnv, cluster: string): number | undefined {
  return env.controlPlaneRecords().find((cp) => cp.name === cluster)?.generation;
}

/** etcd's own cluster ID, asked of a member. */
async function clusterIdOf(access: ClusterAccess): Promise<string> {
  const kv = kvClientFor(access);
  try {
    return (await kv.maintenance.status()).header.cluster_id;
  } finally {
    kv.close();
  }
}

/** Everything status could change: every row of the state store and every file and process of the state dir. */
function stateOf(env: CliEnv): { rows: unknown; files: string[]; pids: number[] } {
  const db = new Database(join(env.stateDir, 'fastplane.db'), { readonly: true });
  try {
    const rows = ['control_planes', 'machines', 'events', 'leases'].map((table) => db.prepare(`SELECT * FROM ${table}`).all());
    const files: string[] = [];
    const walk = (dir: string): void => {
      for (const entry of readdirSync(dir)) {
        const path = join(dir, entry);
        // Logs grow with every command (status logs too) and etcd writes its own files: names only.
        if (entry.endsWith('.log') || entry.includes('-wal') || entry.includes('-shm') || path.includes('/data/')) continue;
        files.push(`${relative(env.stateDir, path)}${statSync(path).isDirectory() ? '/' : `:${String(statSync(path).mtimeMs)}`}`);
        if (statSync(path).isDirectory()) walk(path);
      }
    };
    walk(join(env.stateDir, 'clusters'));
    return { rows, files: files.sort(), pids: pidsUnder(env.stateDir).sort((a, b) => a - b) };
  } finally {
    db.close();
  }
}

/** Runs `status -o json` in a loop until stopped; every run must exit 0 with a parsable document. */
function statusLoop(env: CliEnv, cluster: string): { stop: () => Promise<CliRun[]> } {
  const state = { stopped: false };
  const runs: CliRun[] = [];
  const loop = (async () => {
    while (!state.stopped) runs.push(await env.run(['status', cluster, '-o', 'json']));
  })();
  return {
    stop: async () => {
      state.stopped = true;
      await loop;
      return runs;
    },
  };
}

function eventsJson(run: CliRun): EventEntry[] {
  assert.equal(run.code, 0, run.stderr);
  return JSON.parse(run.stdout) as EventEntry[];
}

describe('one writer per cluster, on real etcd', { timeout: 600_000 }, () => {
  test('up 3, scale 5 and a competing scale 3 beside status loops and events --watch: one cluster, one init, changes never overlap, the last generation wins', async () => {
    const env = newEnv('127.150');
    const file = env.writeManifest('cc', { replicas: 3, provider: { name: 'local-process', provisioningDelay: '15s', deletionDelay: '2s' } });
    const up = env.start(['up', '-f', file, '--timeout', '120s', '-o', 'json']);
    await waitFor('the spec on record', () => generationOf(env, 'cc'));
    const watch = env.start(['events', 'cc', '--watch', '-o', 'json']);
    const loops = [statusLoop(env, 'cc'), statusLoop(env, 'cc'), statusLoop(env, 'cc')];
    // Whatever fails, the loops and the watch stop: a test never leaves processes behind.
    const stopWatchers = async (): Promise<{ statusRuns: CliRun[]; watched: CliRun }> => {
      const statusRuns = (await Promise.all(loops.map((loop) => loop.stop()))).flat();
      watch.child.kill('SIGINT');
      return { statusRuns, watched: await watch.done };
    };
    let watchers: Promise<{ statusRuns: CliRun[]; watched: CliRun }> | undefined;
    try {
      const upRun = await up.done;
      assert.equal(upRun.code, 0, upRun.stderr);
      const access = statusOf(upRun.stdout).status;
      const clusterId = await clusterIdOf(access);

      const scale5 = env.start(['scale', 'cc', '--replicas', '5', '--timeout', '120s']);
      // The competing intent arrives while scale 5 works: its machines take 15 s to provision.
      await waitFor('generation 2 stored by scale 5', () => (generationOf(env, 'cc') === 2 ? true : undefined));
      const scale3 = env.start(['scale', 'cc', '--replicas', '3', '--timeout', '180s', '-o', 'json']);
      const [five, three] = await Promise.all([scale5.done, scale3.done]);

      assert.equal(five.code, 5, `scale 5 is superseded, not refused and not silently converged:\n${five.stderr}\nscale 3:\n${three.stderr}`);
      assert.match(five.stderr, /generation 2 of cc was superseded by generation 3 \(spec\.replicas: 5 -> 3\)/);
      assert.equal(three.code, 0, three.stderr);
      assert.equal(statusOf(three.stdout).metadata.generation, 3);
      assert.equal(statusOf(three.stdout).status.observedGeneration, 3);

      watchers = stopWatchers();
      const { statusRuns, watched } = await watchers;
      assert.ok(statusRuns.length >= 6, `status ran beside the reconciles (${String(statusRuns.length)} runs)`);
      for (const run of statusRuns) {
        assert.equal(run.code, 0, run.stderr);
        assert.equal(statusOf(run.stdout).name, 'cc');
      }
      assert.equal(watched.code, 0, watched.stderr);

      const events = eventsJson(await env.run(['events', 'cc', '-o', 'json']));
      const watchedEvents = watched.stdout.trim().split('\n').map((line) => JSON.parse(line) as EventEntry);
      assert.deepEqual(watchedEvents.map((e) => `${e.startedAt} ${e.action ?? ''} ${e.machine ?? ''}`), events.map((e) => `${e.startedAt} ${e.action ?? ''} ${e.machine ?? ''}`), 'events --watch saw every event, in order');
      assert.equal(events.filter((e) => e.action === 'InitCluster' && e.result === 'ok').length, 1, 'exactly one InitCluster');
      const changes = events.filter((e) => e.action !== null && MEMBERSHIP.has(e.action)).sort((a, b) => a.startedAt.localeCompare(b.startedAt));
      for (let i = 1; i < changes.length; i++) {
        const before = changes[i - 1]!;
        const next = changes[i]!;
        assert.ok((before.endedAt ?? before.startedAt) <= next.startedAt, `${before.message} [${before.startedAt}..${String(before.endedAt)}] overlaps ${next.message} at ${next.startedAt}`);
      }

      const etcd = await askEtcd(access);
      assert.equal(await clusterIdOf(access), clusterId, 'one etcd cluster from start to end');
      assert.equal(etcd.members.length, 3, 'etcd members == the last generation replicas');
      assert.equal(etcd.members.filter((m) => m.isLearner).length, 0, 'no learner left');
      const records = env.machines('cc');
      assert.deepEqual(records.map((m) => m.memberId).sort(), etcd.members.map((m) => m.id).sort(), 'machines == etcd members');

      // Status reads only: with the reconciler paused mid scale-down (a removed member's machine due
      // for deletion), 20 status calls change no record, no file and no process.
      const removals = (): number => env.events('cc').filter((e) => e.action === 'RemoveMember' && e.outcome === 'Succeeded').length;
      const removedBefore = removals();
      const scale1 = env.start(['scale', 'cc', '--replicas', '1', '--timeout', '180s']);
      await waitFor('a member removed by the scale-down', () => (removals() > removedBefore ? true : undefined));
      // Paused outside the state dir's lock: a holder silent for 10 s is taken for hung, and the next
      // reader breaks its lock, a change this check would count.
      const lock = join(env.stateDir, 'clusters', 'cc', 'state.lock');
      for (scale1.child.kill('SIGSTOP'); existsSync(lock); scale1.child.kill('SIGSTOP')) {
        scale1.child.kill('SIGCONT');
        await sleep(20);
      }
      try {
        await sleep(2_500); // past the 2 s deletion delay: the old status path would have wiped the machine
        const before = stateOf(env);
        for (let batch = 0; batch < 5; batch++) {
          const runs = await Promise.all([0, 1, 2, 3].map(() => env.run(['status', 'cc', '-o', 'json'])));
          for (const run of runs) assert.equal(run.code, 0, run.stderr);
        }
        assert.deepEqual(stateOf(env), before, '20 status calls changed nothing');
    } finally {
      scale1.child.kill('SIGCONT');
    }
    const one = await scale1.done;
    assert.equal(one.code, 0, one.stderr);
    } finally {
      await (watchers ?? stopWatchers());
    }
  });

  test('down asks a running reconcile to stop and deletes under the lease; a holder that does not stop is fenced out with --force', async () => {
    const env = newEnv('127.151');
    const up = await env.run(['up', '--name', 'dn', '--replicas', '1', '--timeout', '60s']);
    assert.equal(up.code, 0, up.stderr);

    // A live holder that keeps working (its new machines take 20 s): down asks it to stop, it stops between passes.
    const scale = env.start(['up', '--name', 'dn', '--replicas', '3', '--provisioning-delay', '20s', '--timeout', '120s']);
    await waitFor('the scale-up creating machines', () => (env.machines('dn').length > 1 ? true : undefined));
    const down = await env.run(['down', 'dn']);
    const stopped = await scale.done;
    assert.equal(down.code, 0, down.stderr);
    assert.match(down.stderr, /asked .* to stop reconciling dn/, `scale: ${stopped.stderr}`);
    assert.equal(stopped.code, 5, stopped.stderr);
    assert.match(stopped.stderr, /stopped before generation 2 of dn converged|control plane dn was deleted/);
    assert.deepEqual(pidsUnder(join(env.stateDir, 'clusters')), [], 'no member left running');
    assert.deepEqual(env.controlPlanes(), []);

    // A frozen holder cannot answer: down refuses after --wait, --force fences it out.
    const again = await env.run(['up', '--name', 'dn', '--replicas', '1', '--timeout', '60s']);
    assert.equal(again.code, 0, again.stderr);
    const frozen = env.start(['up', '--name', 'dn', '--replicas', '3', '--provisioning-delay', '20s', '--timeout', '120s']);
    await waitFor('the scale-up creating machines', () => (env.machines('dn').length > 1 ? true : undefined));
    frozen.child.kill('SIGSTOP');
    try {
      const refused = await env.run(['down', 'dn', '--wait', '2s']);
      assert.equal(refused.code, 3, refused.stderr);
      assert.match(refused.stderr, /still reconciles dn after 2s; run fastplane down dn --force/);
      assert.ok(env.controlPlanes().includes('dn'), 'nothing deleted without --force');
      const forced = await env.run(['down', 'dn', '--wait', '1s', '--force']);
      assert.equal(forced.code, 0, forced.stderr);
    } finally {
      frozen.child.kill('SIGCONT');
    }
    const fenced = await frozen.done;
    assert.notEqual(fenced.code, 0, 'the fenced-out holder does not report success');
    await sleep(500);
    assert.deepEqual(pidsUnder(join(env.stateDir, 'clusters')), [], 'the fenced-out holder started nothing after the deletion');
    assert.deepEqual(env.controlPlanes(), [], 'and recorded nothing');
  });

  test('a holder that stops renewing loses its lease after its TTL, whatever its PID: a waiting command takes over and converges', async () => {
    const env = newEnv('127.154');
    const first = await env.run(['up', '--name', 'tt', '--replicas', '1', '--timeout', '60s']);
    assert.equal(first.code, 0, first.stderr);
    const args = ['up', '--name', 'tt', '--replicas', '3', '--provisioning-delay', '20s', '--timeout', '150s'];
    const holder = env.start(['--lease-ttl', '3s', ...args]);
    await waitFor('the holder creating machines', () => (env.machines('tt').length > 1 ? true : undefined));
    holder.child.kill('SIGSTOP');
    try {
      // Its process is alive (stopped): only the TTL can free the lease.
      const follower = await env.run([...args, '-o', 'json']);
      assert.equal(follower.code, 0, follower.stderr);
      assert.equal(statusOf(follower.stdout).status.voters, 3);
    } finally {
      holder.child.kill('SIGCONT');
    }
    const resumed = await holder.done;
    assert.ok(resumed.code === 0 || resumed.code === 5, `the resumed holder is fenced out and answers from the records: ${String(resumed.code)} ${resumed.stderr}`);
    const events = eventsJson(await env.run(['events', 'tt', '-o', 'json']));
    assert.equal(events.filter((e) => e.action === 'InitCluster' && e.result === 'ok').length, 1);
    const { members } = await askEtcd(statusOf((await env.run(['status', 'tt', '-o', 'json'])).stdout).status);
    assert.equal(members.length, 3);
    assert.equal(members.filter((m) => m.isLearner).length, 0);
  });

  test('two state dirs on one host get separate addresses', async () => {
    const first = newEnv('127.152');
    const second = newEnv('127.152');
    const [a, b] = await Promise.all([
      first.run(['up', '--name', 'same', '--replicas', '1', '--timeout', '60s', '-o', 'json']),
      second.run(['up', '--name', 'same', '--replicas', '1', '--timeout', '60s', '-o', 'json']),
    ]);
    assert.equal(a.code, 0, a.stderr);
    assert.equal(b.code, 0, b.stderr);
    const urlA = statusOf(a.stdout).status.endpoints[0];
    const urlB = statusOf(b.stdout).status.endpoints[0];
    assert.ok(urlA !== undefined && urlB !== undefined);
    assert.notEqual(urlA, urlB);
  });
});

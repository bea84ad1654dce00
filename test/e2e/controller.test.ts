import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import Database from 'better-sqlite3';
import { defaultControlPlane, validateControlPlane } from '../../src/api/control-plane.ts';
import { openStateStore } from '../../src/adapters/stores/sqlite-state-store.ts';
import { cliEnvFactory, pidsUnder, statusOf } from '../support/cli.ts';
import { httpGet as get, startController, waitFor, type ControllerReplica } from '../support/controller-replica.ts';

// Registered before the env factory's clean-up (hooks run in order), so that `down` runs while the
// state dir is still there and does not create it again after the clean-up removed it.
after(async () => {
  await teardown();
});

const newEnv = cliEnvFactory();
const env = newEnv('127.170');
const METRICS = '127.170.0.250:9464';
const PROMETHEUS = '127.170.0.251:9090';
const ID = 'ctl-e2e';

/** Stores a spec as any client of the store would, without running up: only the controller acts on it. */
async function storeSpec(name: string, spec: Record<string, unknown>): Promise<number> {
  const store = openStateStore(env.stateDir);
  try {
    const base = defaultControlPlane(name);
    return (await store.applySpec(validateControlPlane({ ...base, spec: { ...base.spec, ...spec } }), Date.now())).record.generation;
  } finally {
    await store.close();
  }
}

function converged(name: string, generation: number): boolean {
  const cp = env.controlPlaneRecords().find((record) => record.name === name);
  return cp?.lastPass?.generation === generation && cp.lastPass.converged;
}

function leaseHolders(): Map<string, string> {
  const db = new Database(join(env.stateDir, 'fastplane.db'), { readonly: true });
  try {
    return new Map(db.prepare<[], { cluster: string; record: string }>('SELECT cluster, record FROM leases').all().map((row) => [row.cluster, (JSON.parse(row.record) as { holder: string }).holder]));
  } finally {
    db.close();
  }
}

let controller: ControllerReplica | undefined;
let prometheus: ChildProcess | undefined;

async function promQuery(query: string): Promise<number | undefined> {
  const answer = await get(`http://${PROMETHEUS}/api/v1/query?query=${encodeURIComponent(query)}`);
  if (answer?.status !== 200) return undefined;
  const result = (JSON.parse(answer.body) as { data: { result: { value: [number, string] }[] } }).data.result;
  return result.length === 1 ? Number(result[0]?.value[1]) : undefined;
}

before(async () => {
  mkdirSync(env.stateDir, { recursive: true });
  controller = startController(env, ['controller', '--id', ID, '--metrics-address', METRICS, '--max-concurrent-reconciles', '4']);
  const dir = join(env.stateDir, 'prometheus');
  mkdirSync(dir, { recursive: true });
  const config = join(dir, 'prometheus.yml');
  // The alert rules docs/operations.md gives, loaded as they are: Prometheus must accept and evaluate them.
  const rules = /```yaml\n(groups:[\s\S]*?)```/.exec(readFileSync(join(import.meta.dirname, '..', '..', 'docs', 'operations.md'), 'utf8'))?.[1];
  assert.ok(rules, 'docs/operations.md has alert rules');
  writeFileSync(join(dir, 'rules.yml'), rules);
  writeFileSync(config, `global: { scrape_interval: 1s, evaluation_interval: 1s }\nrule_files: ['rules.yml']\nscrape_configs:\n  - job_name: fastplane\n    static_configs: [{ targets: ['${METRICS}'] }]\n`);
  prometheus = spawn('prometheus', [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=${PROMETHEUS}`], { stdio: 'ignore' });
  await waitFor('the controller /healthz', async () => ((await get(`http://${METRICS}/healthz`))?.status === 200 ? true : undefined), 30_000);
  await waitFor('Prometheus ready', async () => ((await get(`http://${PROMETHEUS}/-/ready`))?.status === 200 ? true : undefined), 30_000);
});

async function teardown(): Promise<void> {
  if (controller && controller.child.exitCode === null) controller.child.kill('SIGKILL');
  if (prometheus?.pid !== undefined && prometheus.exitCode === null) {
    const exited = new Promise((resolve) => prometheus?.once('exit', resolve));
    prometheus.kill('SIGTERM');
    await Promise.race([exited, sleep(5_000)]);
  }
  // Members are stopped by PID through down; cliEnvFactory then kills anything left under the state dir.
  for (const name of ['prom', 'web']) await env.run(['down', name, '--force', '--wait', '1s']);
}

describe('fastplane controller on real etcd', () => {
  test('bad flags exit 2 naming the flag', async () => {
    const cases: [string[], RegExp][] = [
      [['controller', '--metrics-address', 'localhost'], /--metrics-address: must be HOST:PORT/],
      [['controller', '--max-concurrent-reconciles', '0'], /--max-concurrent-reconciles: must be a whole number/],
      [['controller', '--id', 'a b'], /--id: must be letters/],
      [['--lease-ttl', '0.5s', 'controller'], /--lease-ttl: must be a duration of 1s or more/],
      [['controller', '--metrics-address', METRICS], /--metrics-address: cannot listen on/],
    ];
    for (const [args, message] of cases) {
      const run = await env.run(args);
      assert.equal(run.code, 2, `${args.join(' ')}: ${run.stderr}`);
      assert.match(run.stderr, message);
      assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    }
  });

  test('a 0 -> 5 bring-up nobody runs up for: the controller converges it and Prometheus counts 4 promotions', async () => {
    const generation = await storeSpec('prom', { replicas: 5 });
    await waitFor('prom converged', () => (converged('prom', generation) ? true : undefined), 180_000);
    assert.equal(leaseHolders().get('prom'), ID);
    const query = 'fastplane_membership_changes_total{cluster="prom",action="PromoteLearner",result="ok"}';
    // Scraped every second: the counter reaches Prometheus within a few scrapes.
    const promotions = await waitFor('Prometheus to see 4 promotions', async () => ((await promQuery(query)) === 4 ? 4 : undefined), 30_000);
    assert.equal(promotions, 4);
    assert.equal(await promQuery('fastplane_cluster_leader{cluster="prom"}'), 1);
    assert.equal(await promQuery('fastplane_control_plane_ready{cluster="prom"}'), 1);
    const rules = await get(`http://${PROMETHEUS}/api/v1/rules`);
    const groups = (JSON.parse(rules?.body ?? '{}') as { data?: { groups: { rules: { name: string; health: string; lastError?: string }[] }[] } }).data?.groups ?? [];
    const loaded = groups.flatMap((group) => group.rules);
    assert.equal(loaded.length, 5, 'every alert rule of docs/operations.md loaded');
    for (const rule of loaded) assert.notEqual(rule.health, 'err', `${rule.name}: ${rule.lastError ?? ''}`);
  });

  test('up leaves a new cluster to the controller and waits for it; a killed member is repaired by the controller alone; scale is seen within 1 s', async () => {
    const created = await env.run(['up', '-f', env.writeManifest('web', { replicas: 1, remediation: { unhealthyAfter: '3s' } }), '--timeout', '120s']);
    assert.equal(created.code, 0, created.stderr);
    // Named while it works, or (when it was done before up looked) as the one that did the work.
    assert.match(created.stderr, new RegExp(`${ID} (is reconciling|reconciled) web`), 'up followed the controller on a new cluster');
    assert.ok(converged('web', 1));
    assert.equal(leaseHolders().get('web'), ID, 'the controller took the new cluster');

    const up = await env.run(['up', '--name', 'web', '--replicas', '3', '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    assert.match(up.stderr, new RegExp(`${ID} is reconciling web`), 'up followed the controller');
    assert.equal(leaseHolders().get('web'), ID, 'the controller kept the lease');
    const doc = statusOf(up.stdout);
    const victim = doc.status.machines.find((m) => m.phase === 'Voter' && m.name !== doc.status.leader);
    assert.ok(victim, 'a follower to kill');

    const killedAt = Date.now();
    const pids = pidsUnder(join(env.stateDir, 'clusters', 'web', 'machines', victim.name));
    assert.ok(pids.length > 0, 'the victim runs');
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    const repairedGen = doc.metadata.generation;
    await waitFor(
      'the controller to repair web',
      () => {
        const repaired = env.events('web').some((e) => e.at > killedAt && e.action === 'PromoteLearner' && e.outcome === 'Succeeded');
        const cp = env.controlPlaneRecords().find((record) => record.name === 'web');
        return repaired && cp?.lastPass?.converged === true && cp.lastPass.generation === repairedGen ? true : undefined;
      },
      120_000,
    );
    assert.ok(env.events('web').some((e) => e.action === 'MarkMachineFailed' && e.machine === victim.name), 'the killed member was found unhealthy');
    const healed = await env.run(['status', 'web', '-o', 'json']);
    assert.equal(statusOf(healed.stdout).status.machines.filter((m) => m.phase === 'Voter').length, 3);

    const scale = await env.run(['scale', 'web', '--replicas', '1', '--timeout', '120s']);
    assert.equal(scale.code, 0, scale.stderr);
    const log = readFileSync(join(env.stateDir, 'fastplane.log'), 'utf8').split('\n').filter(Boolean).map((line) => JSON.parse(line) as { time: number; msg: string; cluster?: string; pid?: number });
    const stored = log.filter((line) => line.cluster === 'web' && line.msg.startsWith('stored generation')).at(-1);
    assert.ok(stored, 'scale logged the generation it stored');
    const generation = Number(stored.msg.replace('stored generation ', ''));
    const noticed = controller?.lines.find((line) => line.cluster === 'web' && line.generation === generation && line.msg.includes('noticed'));
    assert.ok(noticed, `the controller noticed generation ${String(generation)}`);
    const lagMs = noticed.time - stored.time;
    console.log(`controller noticed generation ${String(generation)} of web ${String(lagMs)} ms after scale stored it`);
    assert.ok(lagMs < 1_000, `noticed within 1 s, took ${String(lagMs)} ms`);
  });

  test('/metrics, /healthz and /readyz answer', async () => {
    assert.equal((await get(`http://${METRICS}/healthz`))?.status, 200);
    assert.equal((await get(`http://${METRICS}/readyz`))?.status, 200);
    const metrics = await get(`http://${METRICS}/metrics`);
    assert.equal(metrics?.status, 200);
    for (const name of ['fastplane_reconcile_duration_seconds_bucket', 'fastplane_membership_changes_total', 'fastplane_machines', 'fastplane_control_plane_ready', 'fastplane_time_to_ready_seconds_count', 'fastplane_cluster_leader', 'process_resident_memory_bytes']) {
      assert.match(metrics.body, new RegExp(`^${name}`, 'm'), name);
    }
    assert.match(metrics.body, /^fastplane_cluster_leader\{cluster="web"\} 1$/m);
    assert.match(metrics.body, /^fastplane_machines\{cluster="web",phase="Voter"\} 1$/m);
    assert.equal((await get(`http://${METRICS}/nothing`))?.status, 404);
  });

  test('SIGTERM: exits 0 within 10 s and releases every lease', async () => {
    assert.ok(controller);
    assert.deepEqual([...leaseHolders().values()].sort(), [ID, ID]);
    const signalledAt = Date.now();
    controller.child.kill('SIGTERM');
    const run = await controller.done;
    const ms = Date.now() - signalledAt;
    assert.equal(run.code, 0, run.stderr);
    assert.ok(ms < 10_000, `exited ${String(ms)} ms after SIGTERM`);
    assert.deepEqual([...leaseHolders()], [], 'no lease left in the store');
    assert.ok(controller.lines.some((line) => line.msg.includes('lease on web released')));
  });
});

import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultControlPlane, validateControlPlane } from '../../src/api/control-plane.ts';
import { EtcdStateStore } from '../../src/adapters/stores/etcd-state-store.ts';
import { SHUTDOWN_DEADLINE_MS } from '../../src/cli/commands/controller.ts';
import { cliEnvFactory } from '../support/cli.ts';
import { killReplica, startController, waitFor, type ControllerReplica } from '../support/controller-replica.ts';
import { startSingleEtcd, type SingleEtcd } from '../support/single-etcd.ts';

// A controller whose record store (an etcd) stops answering, or dies, while it holds a cluster's
// lease: after SIGTERM it still exits within its shutdown deadline, whatever the store does.
const started: { store?: SingleEtcd; controller?: ControllerReplica }[] = [];

after(async () => {
  for (const { store, controller } of started) {
    if (controller) await killReplica(controller);
    if (store) {
      // A stopped process would keep the SIGTERM pending; stop() ends with SIGKILL anyway.
      try {
        process.kill(store.pid, 'SIGCONT');
      } catch {
        // Already gone (the SIGKILL case).
      }
      await store.stop();
    }
  }
});
// Registered after the hook above: hooks run in order, so the replicas and stores stop before the env's clean-up.
const newEnv = cliEnvFactory();
const env = newEnv('127.172');

/**
 * A controller on a fresh one-member etcd store, leading a cluster whose machines take an hour to
 * provision (so no etcd member is started): it holds the cluster's lease and its registration.
 */
async function controllerLeading(n: number): Promise<{ store: SingleEtcd; controller: ControllerReplica }> {
  mkdirSync(env.stateDir, { recursive: true });
  const entry: { store?: SingleEtcd; controller?: ControllerReplica } = {};
  started.push(entry);
  const store = await startSingleEtcd(`127.172.0.${String(240 + n)}`);
  entry.store = store;
  const records = new EtcdStateStore({ endpoints: [store.endpoint], tls: {} });
  const id = `ctl-shutdown-${String(n)}`;
  try {
    const base = defaultControlPlane(`slow${String(n)}`);
    await records.applySpec(validateControlPlane({ ...base, spec: { ...base.spec, replicas: 1, provider: { ...base.spec.provider, provisioningDelay: '1h' } } }), Date.now());
    const controller = startController(env, ['--store', 'etcd', '--etcd-endpoints', store.endpoint, '--insecure-store', 'controller', '--id', id, '--metrics-address', `127.172.0.${String(250 + n)}:9464`]);
    entry.controller = controller;
    await waitFor('the controller to lead the cluster', async () => ((await records.getLease(`slow${String(n)}`))?.holder === id ? true : undefined), 60_000);
    // A pass or two under the lease, so calls to the store are in flight as in production.
    await sleep(500);
    return { store, controller };
  } finally {
    await records.close();
  }
}

/**
 * What a loaded host adds to the deadline: the controller's own timer firing late and its exit. A
 * controller held by a frozen store would never exit, so the bound still tells the two apart.
 */
const LOADED_HOST_SLACK_MS = 5_000;

/** SIGTERM, then waits at most the shutdown deadline (and the slack) for the exit. */
async function stopWithin(controller: ControllerReplica): Promise<Awaited<ControllerReplica['done']> | undefined> {
  controller.child.kill('SIGTERM');
  return Promise.race([controller.done, sleep(SHUTDOWN_DEADLINE_MS + LOADED_HOST_SLACK_MS).then(() => undefined)]);
}

describe('fastplane controller shutdown with its store gone', () => {
  test('store frozen (SIGSTOP: every call hangs): SIGTERM ends the controller within its shutdown deadline', async () => {
    const { store, controller } = await controllerLeading(1);
    process.kill(store.pid, 'SIGSTOP');
    const run = await stopWithin(controller);
    assert.ok(run, `the controller still ran ${String(SHUTDOWN_DEADLINE_MS + LOADED_HOST_SLACK_MS)} ms after SIGTERM`);
    // Its leases could not be released: they expire after their TTL, and the exit code says so.
    assert.equal(run.code, 1, run.stderr);
    assert.ok(controller.lines.some((line) => line.msg.includes('store did not answer')), 'the log says why');
  });

  test('store killed (SIGKILL): SIGTERM ends the controller within its shutdown deadline', async () => {
    const { store, controller } = await controllerLeading(2);
    process.kill(store.pid, 'SIGKILL');
    const run = await stopWithin(controller);
    assert.ok(run, `the controller still ran ${String(SHUTDOWN_DEADLINE_MS + LOADED_HOST_SLACK_MS)} ms after SIGTERM`);
    assert.equal(run.code, 1, run.stderr);
    assert.ok(controller.lines.some((line) => line.msg.includes('store did not answer')), 'the log says why');
  });
});

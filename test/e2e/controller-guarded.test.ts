import assert from 'node:assert/strict';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { defaultControlPlane, validateControlPlane } from '../../src/api/control-plane.ts';
import { openStateStore } from '../../src/adapters/stores/sqlite-state-store.ts';
import { cliEnvFactory, pidsUnder, statusOf } from '../support/cli.ts';
import { httpGet, killReplica, startController, waitFor, type ControllerReplica } from '../support/controller-replica.ts';

// A guarded cluster (reconfigurationCheck: fastplane) under `fastplane controller` alone: a removal
// there needs status readings from several passes, which the controller must keep between passes.
const METRICS = '127.171.0.250:9464';
const NAME = 'guarded';
let controller: ControllerReplica | undefined;

// Registered before the env factory's clean-up (hooks run in order): the controller is stopped by its
// PID, then `down` stops the members while the state dir is still there.
after(async () => {
  if (controller) await killReplica(controller);
  await env.run(['down', NAME, '--force', '--wait', '1s']);
});
const newEnv = cliEnvFactory();
const env = newEnv('127.171');

async function storeSpec(): Promise<number> {
  const store = openStateStore(env.stateDir);
  try {
    const base = defaultControlPlane(NAME);
    const spec = { ...base.spec, replicas: 3, etcd: { ...base.spec.etcd, reconfigurationCheck: 'fastplane' as const }, remediation: { ...base.spec.remediation, unhealthyAfter: '3s' } };
    return (await store.applySpec(validateControlPlane({ ...base, spec }), Date.now())).record.generation;
  } finally {
    await store.close();
  }
}

async function status(): Promise<ReturnType<typeof statusOf>> {
  const run = await env.run(['status', NAME, '-o', 'json']);
  assert.equal(run.code, 0, run.stderr);
  return statusOf(run.stdout);
}

test('guarded mode under the controller: a SIGKILLed voter is removed and replaced, back to 3 healthy voters', async () => {
  mkdirSync(env.stateDir, { recursive: true });
  controller = startController(env, ['controller', '--id', 'ctl-guarded', '--metrics-address', METRICS]);
  await waitFor('the controller /healthz', async () => ((await httpGet(`http://${METRICS}/healthz`))?.status === 200 ? true : undefined), 30_000);
  const generation = await storeSpec();
  const converged = (): boolean => {
    const cp = env.controlPlaneRecords().find((record) => record.name === NAME);
    return cp?.lastPass?.generation === generation && cp.lastPass.converged;
  };
  await waitFor('the guarded cluster to converge', () => (converged() ? true : undefined), 180_000);

  const before = await status();
  const victim = before.status.machines.find((m) => m.phase === 'Voter' && m.name !== before.status.leader);
  assert.ok(victim, 'a follower to kill');
  const pids = pidsUnder(join(env.stateDir, 'clusters', NAME, 'machines', victim.name));
  assert.ok(pids.length > 0, 'the victim runs');
  const killedAt = Date.now();
  for (const pid of pids) process.kill(pid, 'SIGKILL');

  // Remediation after 3 s unhealthy, then the removal (readings over an election timeout), the
  // replacement's join and promotion: well inside 120 s; without the readings it never happens.
  await waitFor(
    `the controller to remove ${victim.name} and converge again`,
    () => (env.wasDeleted(NAME, victim.name) && converged() ? true : undefined),
    120_000,
  );
  const events = env.events(NAME).filter((e) => e.at > killedAt);
  assert.ok(events.some((e) => e.action === 'RemoveMember' && e.machine === victim.name && e.outcome === 'Succeeded'), `${victim.name}'s member removed`);
  assert.ok(events.some((e) => e.action === 'PromoteLearner' && e.outcome === 'Succeeded'), 'a replacement promoted');
  const after = await status();
  assert.equal(after.status.voters, 3);
  assert.equal(after.status.readyReplicas, 3);
  assert.equal(after.status.learners, 0);
});

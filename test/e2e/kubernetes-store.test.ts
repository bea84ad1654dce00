import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { cliEnvFactory, statusOf, type CliEnv } from '../support/cli.ts';
import { kubectlFor, TEST_KUBERNETES, type Kubectl } from '../support/kubectl.ts';

// A management cluster's API server (a one-machine Kubernetes control plane, its records in SQLite)
// made the record store of an etcd-only cluster with --store kubernetes: up, status and down keep the
// records in the API server, and kubectl shows the cluster's Lease with its holder.
// Registered before the env factory's clean-up (hooks run in order): `down` runs while the state dir is there.
after(async () => {
  const down = await env.run(['down', 'mgmt']);
  assert.equal(down.code, 0, down.stderr);
});
const newEnv = cliEnvFactory();
const NAMESPACE = 'fastplane-system';
let env: CliEnv;
let kubectl: Kubectl;

before(async () => {
  env = newEnv('127.50');
  const up = await env.run(['up', '--name', 'mgmt', '--replicas', '1', '--kubernetes', TEST_KUBERNETES, '--timeout', '150s']);
  assert.equal(up.code, 0, up.stderr);
  kubectl = await kubectlFor(env, 'mgmt');
});

const storeFlags = (): string[] => ['--store', 'kubernetes', '--kubeconfig', kubectl.kubeconfig];

interface LeaseObject {
  spec: { holderIdentity?: string; leaseDurationSeconds: number; leaseTransitions: number };
  metadata: { annotations: Record<string, string> };
}

test('up, status and down of a 3-member etcd cluster through --store kubernetes; kubectl shows its Lease and holder', { timeout: 240_000 }, async () => {
  const up = env.start([...storeFlags(), 'up', '--name', 'web', '--replicas', '3', '--timeout', '150s', '-o', 'json']);
  // While up reconciles, it holds the cluster's Lease.
  let held: LeaseObject | undefined;
  for (let tries = 0; held === undefined && tries < 300; tries++) {
    const lease = await kubectl.json<LeaseObject>(['get', 'lease', 'fastplane-cluster-web', '-n', NAMESPACE]).catch(() => undefined);
    if (lease?.spec.holderIdentity) held = lease;
    else await sleep(200);
  }
  const done = await up.done;
  assert.equal(done.code, 0, done.stderr);
  assert.ok(held, 'kubectl showed the Lease with a holder while up ran');
  const record = JSON.parse(held.metadata.annotations['fastplane.dev/lease-record'] ?? '{}') as { token?: string; pid?: number; fence?: number };
  assert.equal(record.token, held.spec.holderIdentity, 'the holder identity is the holder\'s token');
  assert.equal(record.pid, up.child.pid, 'held by the up process');
  assert.ok(Number.isSafeInteger(record.fence), 'with its fence');
  assert.equal(statusOf(done.stdout).status.voters, 3);

  // The records are in the API server, not in the state dir's SQLite.
  assert.deepEqual(env.controlPlanes(), ['mgmt']);
  const records = await kubectl.json<{ data: Record<string, string> }>(['get', 'configmap', 'fastplane-cluster-web', '-n', NAMESPACE]);
  const machines = JSON.parse(records.data.machines ?? '[]') as { phase: string }[];
  assert.deepEqual(machines.map((m) => m.phase), ['Voter', 'Voter', 'Voter']);
  assert.ok((JSON.parse(records.data.events ?? '[]') as unknown[]).length > 0, 'events are in the API server');
  const secrets = await kubectl.run(['get', 'secrets', '-n', NAMESPACE, '-l', 'fastplane.dev/record=documents', '-o', 'name']);
  assert.ok(secrets.trim() !== '', 'the provider\'s documents are Secrets');
  // Released once up converged, as client-go releases: the Lease stays, with no holder.
  const released = await kubectl.json<LeaseObject>(['get', 'lease', 'fastplane-cluster-web', '-n', NAMESPACE]);
  assert.equal(released.spec.holderIdentity ?? '', '');

  const status = await env.run([...storeFlags(), 'status', 'web', '-o', 'json']);
  assert.equal(status.code, 0, status.stderr);
  assert.deepEqual([statusOf(status.stdout).status.voters, statusOf(status.stdout).status.readyReplicas], [3, 3]);

  const down = await env.run([...storeFlags(), 'down', 'web']);
  assert.equal(down.code, 0, down.stderr);
  const left = await kubectl.run(['get', 'configmap,lease', '-n', NAMESPACE, '-l', 'fastplane.dev/record in (cluster,lease)', '-o', 'name']);
  assert.equal(left.trim(), '', 'down removed the cluster\'s records and Lease');
  const listed = await env.run([...storeFlags(), 'status', '-o', 'json']);
  assert.equal(listed.code, 0, listed.stderr);
  assert.doesNotMatch(listed.stdout, /"web"/);
});

test('bad input: --store kubernetes without a kubeconfig, or with an API server that does not answer, is exit 2 with one line', async () => {
  const missing = await env.run(['--store', 'kubernetes', 'status']);
  assert.equal(missing.code, 2, missing.stderr);
  assert.match(missing.stderr, /^error: --kubeconfig: required with --store kubernetes[^\n]*\n$/);
  const nowhere = join(env.stateDir, 'nowhere.kubeconfig');
  writeFileSync(nowhere, readFileSync(kubectl.kubeconfig, 'utf8').replace(/server: https:\/\/\S+/, 'server: https://127.50.255.254:6443'));
  const silent = await env.run(['--store', 'kubernetes', '--kubeconfig', nowhere, 'status']);
  assert.equal(silent.code, 2, silent.stderr);
  assert.match(silent.stderr, /^error: --kubeconfig \S+nowhere\.kubeconfig: kubernetes store unreachable at https:\/\/127\.50\.255\.254:6443 \(ECONNREFUSED\)\n$/);
});

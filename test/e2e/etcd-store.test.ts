import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { Etcd3 } from 'etcd3';
import { openKvClient, readTlsCredentials } from '../../src/adapters/etcd/etcd3-admin.ts';
import type { ClientAccess } from '../../src/app/client-access.ts';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../src/domain/machine.ts';
import { cliEnvFactory, statusOf, type CliEnv } from '../support/cli.ts';

// The self-hosted set-up of the README: a management control plane brought up with the default store
// (SQLite in the state dir), then made the record store of every later command with --store etcd.
let env: CliEnv;
let access: ClientAccess;
let kv: Etcd3 | undefined;

// Registered before the env factory's clean-up (hooks run in order), so `down` finds mgmt's state dir.
after(async () => {
  kv?.close();
  // Stops mgmt by the PIDs it recorded; the env's cleanup kills anything left under the state dir.
  await env.run(['down', 'mgmt', '--force', '--wait', '5s']);
});
const newEnv = cliEnvFactory();

before(async () => {
  env = newEnv('127.163');
  const mgmt = await env.run(['up', '--name', 'mgmt', '--replicas', '1', '--timeout', '90s', '-o', 'json']);
  assert.equal(mgmt.code, 0, mgmt.stderr);
  const printed = await env.run(['endpoints', 'mgmt', '-o', 'json']);
  assert.equal(printed.code, 0, printed.stderr);
  access = JSON.parse(printed.stdout) as ClientAccess;
  assert.ok(access.cacert !== undefined && access.cert !== undefined && access.key !== undefined, 'mgmt speaks mutual TLS');
  kv = openKvClient(access.endpoints, { credentials: readTlsCredentials({ caFile: access.cacert, certFile: access.cert, keyFile: access.key }) });
});

/** The flags `fastplane endpoints mgmt` printed, as argv. */
function storeFlags(): string[] {
  return ['--store', 'etcd', '--etcd-endpoints', access.endpoints.join(','), '--etcd-cacert', access.cacert ?? '', '--etcd-cert', access.cert ?? '', '--etcd-key', access.key ?? ''];
}

async function records<T>(prefix: string): Promise<T[]> {
  if (kv === undefined) throw new Error('no client');
  const values = await kv.getAll().prefix(prefix).strings();
  return Object.values(values).map((text) => JSON.parse(text) as T);
}

test('with --store etcd pointed at mgmt, up, status, scale and down keep their records in mgmt\'s etcd, not in SQLite', async () => {
  const flagsLine = await env.run(['endpoints', 'mgmt']);
  assert.equal(flagsLine.code, 0, flagsLine.stderr);
  assert.equal(flagsLine.stdout.trim(), storeFlags().join(' '), 'the default output is the flags, ready to paste');

  const up = await env.run([...storeFlags(), 'up', '--name', 'app', '--replicas', '1', '--timeout', '90s', '-o', 'json']);
  assert.equal(up.code, 0, up.stderr);
  const appURL = statusOf(up.stdout).status.endpoints[0];
  assert.ok(appURL !== undefined);
  const block = (url: string) => new URL(url).hostname.split('.').slice(0, 3).join('.');
  assert.ok(!access.endpoints.some((url) => block(url) === block(appURL)), `app (${appURL}) is not in mgmt's address block: the host check skipped it`);

  const cps = await records<ControlPlaneRecord>('/fastplane/control-planes/');
  assert.deepEqual(cps.map((cp) => cp.name), ['app']);
  assert.deepEqual(env.controlPlanes(), ['mgmt'], 'SQLite holds mgmt only');
  assert.deepEqual(env.machines('app'), []);
  const claims = await records<{ owner: string }>('/fastplane/claims/');
  assert.deepEqual(claims.map((c) => c.owner), ['app'], 'the address slot is claimed in etcd');

  // The variables work as the flags do.
  const status = await env.run(['status', 'app', '-o', 'json'], {
    FASTPLANE_STORE: 'etcd',
    FASTPLANE_ETCD_ENDPOINTS: access.endpoints.join(','),
    FASTPLANE_ETCD_CACERT: access.cacert ?? '',
    FASTPLANE_ETCD_CERT: access.cert ?? '',
    FASTPLANE_ETCD_KEY: access.key ?? '',
  });
  assert.equal(status.code, 0, status.stderr);
  assert.equal(statusOf(status.stdout).status.voters, 1);

  const scaled = await env.run([...storeFlags(), 'scale', 'app', '--replicas', '3', '--timeout', '120s', '-o', 'json']);
  assert.equal(scaled.code, 0, scaled.stderr);
  assert.equal(statusOf(scaled.stdout).status.voters, 3);
  const machines = await records<MachineRecord>('/fastplane/machines/app/');
  assert.deepEqual(machines.map((m) => m.phase), ['Voter', 'Voter', 'Voter']);
  const [app] = await records<ControlPlaneRecord>('/fastplane/control-planes/');
  assert.equal(app?.generation, 2);
  assert.equal(app.observedGeneration, 2);
  assert.ok((await records<unknown>('/fastplane/events/app/')).length > 0, 'events are in etcd');

  const down = await env.run([...storeFlags(), 'down', 'app']);
  assert.equal(down.code, 0, down.stderr);
  assert.deepEqual(await records<unknown>('/fastplane/control-planes/'), []);
  assert.deepEqual(await records<unknown>('/fastplane/machines/'), []);
  assert.deepEqual(await records<unknown>('/fastplane/claims/'), [], 'down gave the slot back');
  assert.deepEqual(env.controlPlanes(), ['mgmt']);
});

test('another state dir sharing the etcd store sees the machines out of its reach, never gone: records kept, members reached with the CA from the store', async () => {
  // Both state dirs on an address range of their own, apart from mgmt's.
  const home = newEnv('127.169');
  const other = newEnv('127.169');
  // The other host is given home's key file, as every host sharing a store is.
  const otherFlags = (): string[] => [...storeFlags(), '--secrets-key', join(home.stateDir, 'secrets.key')];
  const up = await home.run([...storeFlags(), 'up', '--name', 'shared', '--replicas', '3', '--timeout', '120s', '-o', 'json']);
  assert.equal(up.code, 0, up.stderr);
  const before = await records<MachineRecord>('/fastplane/machines/shared/');
  assert.equal(before.length, 3);

  const status = await other.run([...otherFlags(), 'status', 'shared', '-o', 'json']);
  assert.equal(status.code, 0, status.stderr);
  const seen = statusOf(status.stdout).status;
  assert.equal(seen.machines.length, 3, 'every machine described');
  assert.equal(seen.readyReplicas, 3, `members reached from the other state dir with the CA from the store: ${JSON.stringify(seen.waits)}`);

  // A reconcile from there changes nothing: no machine is taken for gone, no record is torn down.
  const startedAt = Date.now();
  const again = await other.run([...otherFlags(), 'up', '--name', 'shared', '--replicas', '3', '--timeout', '60s', '-o', 'json']);
  assert.equal(again.code, 0, again.stderr);
  const after = await records<MachineRecord>('/fastplane/machines/shared/');
  assert.deepEqual(after.map((m) => m.name).sort(), before.map((m) => m.name).sort(), 'the same machines on record');
  const events = await other.run([...otherFlags(), 'events', 'shared', '-o', 'json']);
  assert.equal(events.code, 0, events.stderr);
  const acted = (JSON.parse(events.stdout) as EventRecord[]).filter((e) => e.at >= startedAt && e.action !== undefined);
  assert.deepEqual(acted.map((e) => `${e.action ?? ''} ${e.machine ?? ''}`), [], 'no action from the other state dir');

  // A lifecycle action from there is refused with the reason, not carried out on the wrong host.
  const down = await other.run([...otherFlags(), 'down', 'shared', '--wait', '5s']);
  assert.notEqual(down.code, 0, 'down from another state dir cannot stop processes it cannot reach');
  assert.match(down.stderr, /cannot reach its processes/);
  const downAtHome = await home.run([...storeFlags(), 'down', 'shared']);
  assert.equal(downAtHome.code, 0, downAtHome.stderr);
});

test('a bad store setting is exit 2 naming the flag; an etcd store that does not answer is a one-line error', async () => {
  const missing = await env.run(['--store', 'etcd', 'status']);
  assert.equal(missing.code, 2);
  assert.match(missing.stderr, /^error: --etcd-endpoints: required with --store etcd/);
  // Nothing listens on this address (mgmt and app are in other blocks).
  const silent = await env.run(['--store', 'etcd', '--etcd-endpoints', 'http://127.163.250.1:2379', '--insecure-store', 'status']);
  assert.equal(silent.code, 1);
  assert.match(silent.stderr, /^error: etcd store unreachable at http:\/\/127\.163\.250\.1:2379/);
  assert.doesNotMatch(silent.stderr, /\n\s+at /, 'no stack trace');
});

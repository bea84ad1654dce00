import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { CliEnv, statusOf, type CliRun } from '../support/cli.ts';
import { askEtcd, kvClientFor, type ClusterAccess } from '../support/etcd-direct.ts';
import { NetLab, type LabInfo } from '../support/netlab.ts';

// End to end over SSH: six hosts of the network lab (each its own network namespace and sshd), hosts
// handed out by a provisioning hook that takes 2-6 s each, and every step checked with etcdctl and by
// asking each member on the hosts' own addresses over mutual TLS from fastplane's side of the bridge.
// The CA is rotated on the hosts too.

const LAB = 61;
const ROOT = join(import.meta.dirname, '..', '..');
const HOOK = `bash ${join(ROOT, 'examples', 'netlab-provision.sh')}`;
const lab = new NetLab(LAB);
// The lab's addresses are not loopback; the prefix only keeps any local member of this env apart.
const env = new CliEnv('127.61');
let info: LabInfo;

/** Seconds each step took, printed as JSON at the end. */
const seconds: Record<string, number> = {};

function expectOk(run: CliRun, what: string): void {
  seconds[what] = run.ms / 1000;
  assert.equal(run.code, 0, `${what} exited ${String(run.code)}:\n${run.stderr.slice(-3000)}`);
}

async function access(): Promise<ClusterAccess> {
  const run = await env.run(['status', 'lab', '-o', 'json'], { FPL_LAB: String(LAB) });
  expectOk(run, 'status');
  return statusOf(run.stdout).status;
}

/** etcdctl's member list, from this (the root) namespace to the hosts' addresses over mutual TLS. */
function etcdctlMembers(cluster: ClusterAccess): { clientURLs?: string[]; isLearner?: boolean }[] {
  const tls = cluster.tls;
  assert.ok(tls, 'the cluster speaks TLS');
  const out = execFileSync('etcdctl', ['--endpoints', cluster.endpoints.join(','), '--cacert', tls.caFile, '--cert', tls.certFile, '--key', tls.keyFile, 'member', 'list', '-w', 'json'], {
    env: { ...process.env, ETCDCTL_API: '3' },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return (JSON.parse(out) as { members: { clientURLs?: string[]; isLearner?: boolean }[] }).members;
}

/** Voters as etcd itself reports them (etcdctl, and each member's status), each on a lab address with its version. */
async function voters(expected: number, version: string): Promise<string[]> {
  const cluster = await access();
  const listed = etcdctlMembers(cluster);
  assert.equal(listed.filter((m) => m.isLearner !== true).length, expected, `etcdctl member list: ${JSON.stringify(listed)}`);
  const { members, statuses } = await askEtcd(cluster);
  assert.equal(members.filter((m) => !m.isLearner).length, expected, `voters: ${JSON.stringify(members)}`);
  assert.equal(members.length, expected);
  const labAddresses = new Set(info.hosts.map((h) => `https://${h.address}:2379`));
  for (const m of members) assert.ok(labAddresses.has(m.clientURLs[0] ?? ''), `${m.clientURLs.join(',')} is not a lab host`);
  assert.deepEqual(statuses.map((s) => s.version), statuses.map(() => version));
  return members.map((m) => m.clientURLs[0] ?? '');
}

async function readBack(key: string): Promise<string | null> {
  const kv = kvClientFor(await access());
  try {
    return await kv.get(key).string();
  } finally {
    kv.close();
  }
}

describe('ssh provider on the network lab', { timeout: 900_000 }, () => {
  before(() => {
    info = lab.up(6);
  });
  after(() => {
    lab.down();
    env.cleanup();
  });

  test('up 5 with a provisioning hook, scale 5 -> 3 -> 5, rollout 3.4.23 -> 3.5.16, CA rotation, down', async () => {
    const manifest = env.writeManifest('lab', {
      replicas: 5,
      version: '3.4.23',
      provider: {
        name: 'ssh',
        identityFile: info.identityFile,
        knownHostsFile: info.knownHostsFile,
        provision: { create: `${HOOK} create`, delete: `${HOOK} delete`, timeout: '1m' },
      },
    });
    const labEnv = { FPL_LAB: String(LAB) };

    expectOk(await env.run(['up', '-f', manifest, '--timeout', '4m'], labEnv), 'up');
    const first = await voters(5, '3.4.23');
    // Each of the five hosts came from the hook, which took 2-6 s each: they provisioned at once.
    const created = env.events('lab').filter((e) => e.action === 'CreateMachine' && e.outcome === 'Succeeded');
    assert.equal(created.length, 5);
    const kv = kvClientFor(await access());
    await kv.put('written-at-5').value('kept');
    kv.close();

    expectOk(await env.run(['scale', 'lab', '--replicas', '3', '--timeout', '3m'], labEnv), 'scale 3');
    const three = await voters(3, '3.4.23');
    assert.ok(three.every((url) => first.includes(url)), 'scale down keeps three of the original members');
    // Deleted machines gave their hosts back: the hook's bookkeeping holds three hosts.
    assert.equal(readdirSync(join(info.dir, 'taken')).length, 3);

    expectOk(await env.run(['scale', 'lab', '--replicas', '5', '--timeout', '4m'], labEnv), 'scale 5');
    await voters(5, '3.4.23');

    expectOk(await env.run(['rollout', 'lab', '--version', '3.5.16', '--timeout', '6m'], labEnv), 'rollout');
    await voters(5, '3.5.16');
    assert.equal(await readBack('written-at-5'), 'kept');

    // A new CA, and every member's certificates from it, written to the hosts one restart at a time.
    const memberFiles = (file: string): Buffer[] =>
      info.hosts.flatMap((host) => {
        const dir = join(host.baseDir, 'clusters', 'lab');
        return existsSync(dir) ? readdirSync(dir).map((machine) => readFileSync(join(dir, machine, 'pki', file))) : [];
      });
    const oldCa = readFileSync(join(env.stateDir, 'clusters', 'lab', 'pki', 'ca.crt'));
    const oldServerCerts = memberFiles('server.crt');
    expectOk(await env.run(['certs', 'renew', 'lab', '--ca'], labEnv), 'CA rotation');
    const newCa = readFileSync(join(env.stateDir, 'clusters', 'lab', 'pki', 'ca.crt'));
    assert.notDeepEqual(newCa, oldCa);
    assert.equal(memberFiles('ca.crt').length, 5);
    for (const ca of memberFiles('ca.crt')) assert.deepEqual(ca, newCa, 'every host trusts the new CA only');
    for (const cert of memberFiles('server.crt')) assert.ok(!oldServerCerts.some((old) => old.equals(cert)), 'every member has a new certificate');
    await voters(5, '3.5.16');
    assert.equal(await readBack('written-at-5'), 'kept');

    expectOk(await env.run(['down', 'lab'], labEnv), 'down');
    for (const host of info.hosts) {
      const clusterDir = join(host.baseDir, 'clusters', 'lab');
      assert.ok(!existsSync(clusterDir) || readdirSync(clusterDir).length === 0, `${host.address} still holds ${clusterDir}`);
    }
    assert.equal(readdirSync(join(info.dir, 'taken')).length, 0, 'every host was given back through the delete hook');
    console.log(JSON.stringify({ sshLabSeconds: seconds }));
  });
});

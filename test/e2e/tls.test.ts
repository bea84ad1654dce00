import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { isAbsolute, join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { CliEnv, statusOf } from '../support/cli.ts';
import { askEtcd } from '../support/etcd-direct.ts';

const env = new CliEnv('127.81');
after(() => {
  env.cleanup();
});

/** Debian's etcd-client (3.4), as a user would run it. */
function etcdctl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile('/usr/bin/etcdctl', ['--dial-timeout', '2s', '--command-timeout', '3s', ...args], { env: { ...process.env, ETCDCTL_API: '3' }, timeout: 20_000 }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === 'number' ? error.code : 1, stdout, stderr });
    });
  });
}

/** Every file under dir whose name ends in .key. */
function keyFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter((file) => file.endsWith('.key')).map((file) => join(dir, file));
}

describe('mutual TLS by default', { timeout: 240_000 }, () => {
  test('up makes a TLS cluster whose status names client credentials that etcdctl lists the members with; keys are 0600', async () => {
    const up = await env.run(['up', '--name', 'sec', '--replicas', '3', '--timeout', '90s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    assert.doesNotMatch(up.stderr, /warning/i, 'no insecure warning, no deprecation warning');
    const doc = statusOf(up.stdout);
    const { tls } = doc.status;
    assert.ok(tls, 'status.tls is set');
    for (const file of [tls.caFile, tls.certFile, tls.keyFile]) {
      assert.ok(isAbsolute(file) && existsSync(file), `${file} is an absolute path to a file`);
    }
    assert.equal(doc.spec.provider.insecure, false);
    assert.ok(doc.status.endpoints.length === 3 && doc.status.endpoints.every((url) => url.startsWith('https://')), doc.status.endpoints.join());
    assert.ok(doc.status.machines.every((m) => m.peerURL?.startsWith('https://') === true));

    const endpoints = doc.status.endpoints.join(',');
    const list = await etcdctl(['--endpoints', endpoints, '--cacert', tls.caFile, '--cert', tls.certFile, '--key', tls.keyFile, 'member', 'list', '-w', 'json']);
    assert.equal(list.code, 0, list.stderr);
    const { members } = JSON.parse(list.stdout) as { members: { peerURLs: string[] }[] };
    assert.deepEqual(members.map((m) => m.peerURLs[0]).sort(), doc.status.machines.map((m) => m.peerURL).sort());
    const anonymous = await etcdctl(['--endpoints', endpoints, '--cacert', tls.caFile, 'member', 'list']);
    assert.notEqual(anonymous.code, 0, 'etcdctl without a client certificate is refused');

    // The working copy; snapshots of stored generations (generations/, current/) hold copies, private as well.
    const keys = keyFiles(join(env.stateDir, 'clusters', 'sec'));
    assert.equal(keys.filter((key) => !/\/(generations|current)\//.test(key)).length, 2 + 3 * 2, 'CA and client keys, a server and a peer key per member');
    for (const key of keys) assert.equal((statSync(key).mode & 0o777).toString(8), '600', `${key} is private`);
  });

  test('--insecure warns, serves plain http, is fixed at creation; status of all clusters reads each with its own credentials', async () => {
    const help = await env.run(['up', '--help']);
    assert.match(help.stdout, /--insecure\s+debugging only/);

    const up = await env.run(['up', '--name', 'plain', '--replicas', '1', '--insecure', '--timeout', '60s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    assert.match(up.stderr, /warning: control plane plain runs without TLS .*debugging only/);
    const doc = statusOf(up.stdout);
    assert.equal(doc.spec.provider.insecure, true);
    assert.equal(doc.status.tls, undefined);
    assert.ok(doc.status.endpoints.length === 1 && doc.status.endpoints.every((url) => url.startsWith('http://')), doc.status.endpoints.join());
    assert.equal((await askEtcd(doc.status)).members.length, 1);
    assert.equal(existsSync(join(env.stateDir, 'clusters', 'plain', 'pki')), false, 'no certificates');

    const flip = await env.run(['up', '--name', 'sec', '--insecure']);
    assert.equal(flip.code, 2, flip.stderr);
    assert.match(flip.stderr, /spec\.provider\.insecure: cannot change on an existing control plane/);
    const again = await env.run(['up', '--name', 'plain', '--timeout', '60s', '-o', 'json']);
    assert.equal(again.code, 0, again.stderr);
    assert.equal(statusOf(again.stdout).spec.provider.insecure, true, 'stays insecure without the flag');

    const all = await env.run(['status', '-o', 'json']);
    assert.equal(all.code, 0, all.stderr);
    const docs = new Map((JSON.parse(all.stdout) as ControlPlaneStatusDocument[]).map((d) => [d.name, d.status]));
    assert.equal(docs.get('sec')?.voters, 3);
    assert.ok(docs.get('sec')?.tls !== undefined);
    assert.equal(docs.get('plain')?.voters, 1);
    assert.equal(docs.get('plain')?.tls, undefined);

    for (const name of ['sec', 'plain']) assert.equal((await env.run(['down', name])).code, 0);
    assert.equal(existsSync(join(env.stateDir, 'clusters', 'sec')), false, 'down removes the certificates with the cluster');
  });
});

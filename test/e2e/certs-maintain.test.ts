import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import type { CertificateInfo } from '../../src/adapters/providers/local/local-pki.ts';
import type { MaintainReport } from '../../src/dr/maintain.ts';
import { ContinuousWriter } from '../chaos/writer.ts';
import { cliEnvFactory, statusOf } from '../support/cli.ts';
import { adminFor, askEtcd, kvClientFor } from '../support/etcd-direct.ts';

const newEnv = cliEnvFactory();
const env = newEnv('127.241');

function certs(stdout: string): Map<string, CertificateInfo> {
  return new Map((JSON.parse(stdout) as CertificateInfo[]).map((c) => [c.file, c]));
}

describe('certificates and maintenance on real etcd', { timeout: 300_000 }, () => {
  test('certs renew during writes: new member and client certificates, members restarted one at a time, no acknowledged write lost', async () => {
    const up = await env.run(['up', '--name', 'tls', '--replicas', '3', '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const doc = statusOf(up.stdout);
    const before = await env.run(['certs', 'tls', '-o', 'json']);
    assert.equal(before.code, 0, before.stderr);
    const old = certs(before.stdout);
    assert.equal(old.size, 2 + 3 * 2, 'CA, client, and a server and a peer certificate per member');
    for (const cert of old.values()) assert.ok(Date.parse(cert.notAfter) > Date.now(), `${cert.file} is valid`);

    // Certificates carry whole seconds: renewed ones must start later than the old ones.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const writer = new ContinuousWriter(doc.status, '/renew/');
    writer.start();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const renew = await env.run(['certs', 'renew', 'tls', '-o', 'json']);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await writer.stop();
    assert.equal(renew.code, 0, renew.stderr);
    const restarted = [...renew.stderr.matchAll(/renewed the certificates of (\S+) and restarted it/g)].map((m) => m[1]);
    assert.deepEqual([...restarted].sort(), doc.status.machines.map((m) => m.name).sort(), 'every member restarted once');
    assert.equal(restarted.at(-1), doc.status.leader, 'the leader last');

    const renewed = certs(renew.stdout);
    for (const [file, cert] of renewed) {
      const was = old.get(file);
      assert.ok(was, `${file} existed before`);
      if (cert.subject === 'CN=fastplane-etcd-ca') assert.deepEqual(cert, was, 'the CA stays');
      else assert.ok(Date.parse(cert.notAfter) > Date.parse(was.notAfter), `${file} has a later expiry`);
    }
    const report = await writer.verify(doc.status);
    assert.equal(report.ackedButLost, 0, JSON.stringify(report));
    assert.ok(report.writesAcked > 20, JSON.stringify(report));

    const { members, statuses } = await askEtcd(doc.status);
    assert.equal(members.filter((m) => !m.isLearner).length, 3);
    assert.ok(statuses.every((s) => s.leaderId !== '0'), 'every member knows the leader again');
    const pki = dirname(doc.status.tls?.caFile ?? '');
    assert.equal((statSync(pki).mode & 0o777).toString(8), '700', 'the CA folder is private');
    assert.equal((statSync(join(pki, 'ca.key')).mode & 0o777).toString(8), '600', 'the CA key is private');
    assert.equal((statSync(join(pki, 'client.key')).mode & 0o777).toString(8), '600', 'the new client key is private');
  });

  test('maintain recovers from a NOSPACE alarm: compacts, defragments every member (leader last), disarms', async () => {
    const manifest = env.writeManifest('full', { replicas: 3, etcd: { quotaBackendBytes: 8 * 1024 * 1024 } });
    const up = await env.run(['up', '-f', manifest, '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const doc = statusOf(up.stdout);
    const client = kvClientFor(doc.status);
    const value = randomBytes(300_000).toString('base64');
    let refused: unknown;
    try {
      for (let i = 0; i < 200 && refused === undefined; i++) await client.put('big').value(value).catch((error: unknown) => (refused = error));
    } finally {
      client.close();
    }
    assert.match(String(refused), /database space exceeded/);
    const admin = adminFor(doc.status);
    try {
      assert.ok((await admin.alarms(doc.status.endpoints)).some((a) => a.alarm === 'NOSPACE'), 'NOSPACE raised');
      const run = await env.run(['maintain', 'full', '-o', 'json']);
      assert.equal(run.code, 0, run.stderr);
      const result = JSON.parse(run.stdout) as MaintainReport;
      assert.ok(result.compactedTo !== undefined && result.compactedTo > 1, 'compacted');
      assert.equal(result.defragmented.length, 3, 'every member defragmented');
      assert.equal(result.defragmented.at(-1)?.member, doc.status.leader, 'the leader last');
      assert.ok(result.defragmented.every((d) => d.after < d.before), JSON.stringify(result.defragmented));
      assert.ok(result.disarmed.length >= 1);
      assert.deepEqual(await admin.alarms(doc.status.endpoints), [], 'no alarm left');
    } finally {
      await admin.close();
    }
    const after = kvClientFor(doc.status);
    try {
      await after.put('small').value('fits');
      assert.equal(await after.get('small').string(), 'fits');
    } finally {
      after.close();
    }
  });
});

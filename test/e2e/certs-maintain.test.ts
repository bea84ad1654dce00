import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, test } from 'node:test';
import type { CertificateInfo } from '../../src/ports/care.ts';
import type { MaintainReport } from '../../src/care/maintain.ts';
import { ContinuousWriter } from '../chaos/writer.ts';
import { cliEnvFactory, statusOf } from '../support/cli.ts';
import { adminFor, askEtcd, kvClientFor } from '../support/etcd-direct.ts';
import { ClusterWatch } from '../support/cluster-watch.ts';

const newEnv = cliEnvFactory();
const env = newEnv('127.181');

function certs(stdout: string): Map<string, CertificateInfo> {
  return new Map((JSON.parse(stdout) as CertificateInfo[]).map((c) => [c.file, c]));
}

/** Permission bits as octal text ('600'). */
function modeOf(path: string): string {
  return (statSync(path).mode & 0o777).toString(8);
}

/** The certificate a member presents over TLS, as openssl reads it: issuer and expiry. */
function presented(endpoint: string, tls: { caFile: string; certFile: string; keyFile: string }): { issuer: string; notAfter: number } {
  const { hostname, port } = new URL(endpoint);
  const pem = execFileSync('openssl', ['s_client', '-connect', `${hostname}:${port}`, '-CAfile', tls.caFile, '-cert', tls.certFile, '-key', tls.keyFile, '-verify_return_error'], { input: '', stdio: ['pipe', 'pipe', 'ignore'] }).toString();
  const text = execFileSync('openssl', ['x509', '-noout', '-issuer', '-enddate'], { input: pem }).toString();
  return { issuer: /issuer=\s*(.*)/.exec(text)?.[1]?.trim() ?? '', notAfter: Date.parse(/notAfter=(.*)/.exec(text)?.[1] ?? '') };
}

/** etcdctl's own health check over TLS with the given client credentials: it fails unless the chain verifies. */
function etcdctlHealthy(endpoints: string[], tls: { caFile: string; certFile: string; keyFile: string }): string | undefined {
  const run = spawnSync('etcdctl', ['--endpoints', endpoints.join(','), '--cacert', tls.caFile, '--cert', tls.certFile, '--key', tls.keyFile, 'endpoint', 'health'], {
    env: { ...process.env, ETCDCTL_API: '3' },
    encoding: 'utf8',
  });
  // etcdctl reports health on stderr.
  const said = `${run.stdout}${run.stderr}`;
  const healthy = said.split('\n').filter((line) => line.includes('is healthy')).length;
  return run.status === 0 && healthy === endpoints.length ? undefined : said;
}

describe('certificates and maintenance on real etcd', { timeout: 300_000 }, () => {
  test('after up nothing in the state dir is readable by other users', async () => {
    const up = await env.run(['up', '--name', 'tls', '--replicas', '3', '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const doc = statusOf(up.stdout);
    assert.equal(modeOf(env.stateDir), '700', 'the state dir');
    for (const file of ['fastplane.db', 'fastplane.db-wal', 'fastplane.db-shm', 'fastplane.log']) {
      const path = join(env.stateDir, file);
      if (file === 'fastplane.db' || file === 'fastplane.log' || existsSync(path)) assert.equal(modeOf(path), '600', file);
    }
    for (const machine of doc.status.machines) assert.equal(modeOf(join(env.stateDir, 'clusters', 'tls', 'machines', machine.name, 'etcd.log')), '600', `${machine.name}'s etcd.log`);
    const pki = dirname(doc.status.tls?.caFile ?? '');
    assert.equal(modeOf(pki), '700', 'the CA folder');
    assert.equal(modeOf(join(pki, 'ca.key')), '600', 'the CA key');
  });

  test('certs renew during writes: new member and client certificates, members restarted one at a time, no acknowledged write lost', async (t) => {
    const doc = statusOf((await env.run(['status', 'tls', '-o', 'json'])).stdout);
    const before = await env.run(['certs', 'tls', '-o', 'json']);
    assert.equal(before.code, 0, before.stderr);
    const old = certs(before.stdout);
    assert.equal(old.size, 2 + 3 * 2, 'CA, client, and a server and a peer certificate per member');
    for (const cert of old.values()) assert.ok(Date.parse(cert.notAfter) > Date.now(), `${cert.file} is valid`);

    // Certificates carry whole seconds: renewed ones must start later than the old ones.
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const writer = new ContinuousWriter(doc.status, '/renew/');
    // The cluster seen from outside throughout: one member down at a time never costs quorum.
    const watch = new ClusterWatch(doc.status);
    writer.start();
    watch.start();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const renew = await env.run(['certs', 'renew', 'tls', '-o', 'json']);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await writer.stop();
    await watch.stop();
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
    // The writer's longest outage is reported, not judged: it is an election and a reconnect, and
    // their length is the host's; what must hold is quorum, in every sample.
    t.diagnostic(JSON.stringify(report));
    assert.ok(watch.samples.length > 10, 'the cluster was watched during the renewal');
    assert.deepEqual(watch.quorumLosses(), [], 'quorum held in every sample');

    const { members, statuses } = await askEtcd(doc.status);
    assert.equal(members.filter((m) => !m.isLearner).length, 3);
    assert.ok(statuses.every((s) => s.leaderId !== '0'), 'every member knows the leader again');
    const pki = dirname(doc.status.tls?.caFile ?? '');
    assert.equal((statSync(pki).mode & 0o777).toString(8), '700', 'the CA folder is private');
    assert.equal((statSync(join(pki, 'ca.key')).mode & 0o777).toString(8), '600', 'the CA key is private');
    assert.equal((statSync(join(pki, 'client.key')).mode & 0o777).toString(8), '600', 'the new client key is private');
  });

  test('certs renew --ca during writes: both CAs trusted, certificates from the new CA, old CA dropped; no acknowledged write lost', async (t) => {
    const doc = statusOf((await env.run(['status', 'tls', '-o', 'json'])).stdout);
    const tls = doc.status.tls;
    assert.ok(tls);
    const oldIssuer = presented(doc.status.endpoints[0] ?? '', tls).issuer;
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const startedAt = Date.now();
    const writer = new ContinuousWriter(doc.status, '/rotate/');
    writer.start();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const rotate = await env.run(['certs', 'renew', 'tls', '--ca', '-o', 'json']);
    await new Promise((resolve) => setTimeout(resolve, 500));
    await writer.stop();
    assert.equal(rotate.code, 0, rotate.stderr);
    // Three rolling restarts, each leader last: trust both, new certificates, trust the new CA only.
    for (const step of [/(\S+) restarted trusting both CAs/g, /renewed the certificates of (\S+) from the new CA and restarted it/g, /(\S+) restarted trusting the new CA only/g]) {
      const order = [...rotate.stderr.matchAll(step)].map((m) => m[1]);
      assert.deepEqual([...order].sort(), doc.status.machines.map((m) => m.name).sort(), `every member once: ${String(step)}`);
    }
    const report = await writer.verify(doc.status);
    assert.equal(report.ackedButLost, 0, JSON.stringify(report));
    assert.ok(report.writesAcked > 20, JSON.stringify(report));
    // Outage reported, not judged (see the renewal above, whose rolling restart this one shares).
    t.diagnostic(JSON.stringify(report));

    const after = certs(rotate.stdout);
    const ca = [...after.values()].find((c) => c.file === tls.caFile);
    assert.ok(ca && ca.subject !== 'CN=fastplane-etcd-ca' && ca.subject.startsWith('CN=fastplane-etcd-ca-'), `a new CA: ${JSON.stringify(ca)}`);
    for (const cert of after.values()) assert.equal(cert.issuer, ca.subject, `${cert.file} is issued by the new CA`);
    for (const endpoint of doc.status.endpoints) {
      const seen = presented(endpoint, tls);
      assert.notEqual(seen.issuer, oldIssuer, `${endpoint} presents a certificate of the new CA`);
      assert.match(seen.issuer, /fastplane-etcd-ca-/);
      assert.ok(seen.notAfter > startedAt + 300 * 86_400_000, `${endpoint}: a year from now`);
    }
    assert.equal(etcdctlHealthy(doc.status.endpoints, tls), undefined, 'etcdctl trusts the members with the new CA alone');
    const pki = dirname(tls.caFile);
    assert.ok(!existsSync(join(pki, 'ca-next.key')) && !existsSync(join(pki, 'ca-rotation.json')), 'the rotation left nothing behind');
    assert.equal(modeOf(join(pki, 'ca.key')), '600', 'the new CA key is private');
  });

  test('CertificatesExpiringSoon 30 days ahead, and a reconcile renews on its own and clears it', async () => {
    // The test hook issues 20-day certificates: inside the 30-day window.
    const short = await env.run(['certs', 'renew', 'tls'], { FASTPLANE_CERT_VALIDITY: '480h' });
    assert.equal(short.code, 0, short.stderr);
    const status = await env.run(['status', 'tls', '-o', 'json']);
    const soon = statusOf(status.stdout).status.conditions.find((c) => c.type === 'CertificatesExpiringSoon');
    assert.equal(soon?.status, 'True', JSON.stringify(soon));
    assert.match(soon.message, /expires first/);
    const table = await env.run(['status', 'tls']);
    assert.match(table.stdout, /CertificatesExpiringSoon\s+True/);

    const up = await env.run(['up', '--name', 'tls', '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const cleared = statusOf(up.stdout).status.conditions.find((c) => c.type === 'CertificatesExpiringSoon');
    assert.equal(cleared?.status, 'False', JSON.stringify(cleared));
    assert.ok(env.events('tls').some((e) => e.action === 'RenewCertificates' && e.outcome === 'Succeeded'), 'renewed by the reconcile loop');
    const list = certs((await env.run(['certs', 'tls', '-o', 'json'])).stdout);
    for (const cert of list.values()) assert.ok(Date.parse(cert.notAfter) > Date.now() + 300 * 86_400_000, `${cert.file} lasts a year again`);
  });

  test('a renewal left half done by a killed process: status --explain says what it waits for; the next up carries it on, no member renewed twice', async () => {
    const short = await env.run(['certs', 'renew', 'tls'], { FASTPLANE_CERT_VALIDITY: '480h' });
    assert.equal(short.code, 0, short.stderr);
    const before = certs((await env.run(['certs', 'tls', '-o', 'json'])).stdout);
    const killed = await env.run(['up', '--name', 'tls', '--timeout', '120s'], { FASTPLANE_FAILPOINTS: 'after-care-step' });
    assert.equal(killed.signal, 'SIGKILL', `the failpoint was reached: ${killed.stderr.slice(-400)}`);
    const left = env.controlPlaneRecords().find((cp) => cp.name === 'tls')?.careJob;
    assert.ok(left && left.kind === 'RenewCertificates' && left.ended === undefined && left.waiting, JSON.stringify(left));
    const explain = await env.run(['status', 'tls', '--explain']);
    assert.equal(explain.code, 0, explain.stderr);
    assert.ok(explain.stdout.includes(`[${left.waiting.reason}] certificate renewal: ${left.waiting.message}`), explain.stdout);
    const halfway = certs((await env.run(['certs', 'tls', '-o', 'json'])).stdout);

    const up = await env.run(['up', '--name', 'tls', '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const job = env.controlPlaneRecords().find((cp) => cp.name === 'tls')?.careJob;
    assert.equal(job?.ended?.ok, true, JSON.stringify(job));
    assert.equal(job.startedAt, left.startedAt, 'the same job, carried on');
    assert.equal(job.rolling.done.length, 3, 'every member once');
    const after = certs((await env.run(['certs', 'tls', '-o', 'json'])).stdout);
    const renewedFirst = [...halfway.values()].filter((c) => c.notBefore !== before.get(c.file)?.notBefore);
    assert.ok(renewedFirst.length > 0, 'the killed process renewed something');
    for (const cert of renewedFirst) assert.equal(after.get(cert.file)?.notBefore, cert.notBefore, `${cert.file} was not renewed again`);
    for (const cert of after.values()) assert.ok(Date.parse(cert.notAfter) > Date.now() + 300 * 86_400_000, `${cert.file} lasts a year`);
  });

  test('scheduled maintenance: a reconcile compacts and defragments on its own once `every` has passed, and records it', async () => {
    const manifest = env.writeManifest('tls', { replicas: 3, maintenance: { every: '1s', retainRevisions: 0, fragmentationThreshold: 0.01 } });
    const up = await env.run(['up', '-f', manifest, '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    assert.equal(statusOf(up.stdout).status.phase, 'Ready');
    // One event per job, when it ends (passes in which it only waited record none).
    const ran = env.events('tls').filter((e) => e.action === 'RunMaintenance');
    assert.ok(ran.length >= 1, JSON.stringify(ran));
    for (const event of ran) {
      assert.equal(event.outcome, 'Succeeded', JSON.stringify(event));
      assert.match(event.message, /compact/i, 'the event says what was done');
      assert.match(event.message, /defragmented|below the threshold/, 'what each member got, from every pass, in the one event');
    }
    const record = env.controlPlaneRecords().find((cp) => cp.name === 'tls');
    assert.equal(record?.lastMaintenance?.ok, true, JSON.stringify(record?.lastMaintenance));
    assert.equal(record.generation, record.observedGeneration, 'a spec change that rolls nothing');
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

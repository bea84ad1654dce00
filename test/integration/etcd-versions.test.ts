import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { Etcd3Admin, readTlsCredentials } from '../../src/adapters/etcd/etcd3-admin.ts';
import { findEtcdBinary, listEtcdVersions } from '../../src/adapters/etcd/etcd-binaries.ts';
import { LocalProcessProvider } from '../../src/adapters/providers/local/local-process-provider.ts';
import { memberFlags } from '../../src/adapters/host/member-flags.ts';
import { initialMemberId, LOW_MEMBER_ID, tokenForLowMemberId } from '../../src/cluster/member-id.ts';
import { initSample, initToken, joinSample, type CalibrationWorld } from '../../src/bench/calibration.ts';
import { cliEnvFactory, pidsUnder, statusOf } from '../support/cli.ts';

// Every installed etcd, 3.4 to 3.7, runs with the command line fastplane builds for its minor
// (src/adapters/host/member-flags.ts): a member starts, a learner joins and is promoted. Needs
// `bash scripts/install-etcd.sh` (3.4.23 from Debian, 3.5.x from Debian and Go, 3.6.x and 3.7.x from Go).

const PREFIX = process.env.FASTPLANE_ADDRESS_PREFIX ?? '127.241';
const versions = listEtcdVersions();
const newEnv = cliEnvFactory();
const tempDirs: string[] = [];

after(() => {
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

function tempDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

/** The newest installed patch of a minor ("3.6" -> "3.6.17"). */
function newest(minor: string): string {
  const patches = versions.filter((version) => version.startsWith(`${minor}.`));
  const last = patches.sort((a, b) => Number(a.split('.')[2]) - Number(b.split('.')[2])).at(-1);
  assert.ok(last !== undefined, `no etcd ${minor}.x installed (found ${versions.join(', ')}): run bash scripts/install-etcd.sh`);
  return last;
}

/** Flag names `etcd --help` lists. */
function helpFlags(binary: string): Set<string> {
  const help = execFileSync(binary, ['--help'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return new Set([...help.matchAll(/^\s+(--[a-z0-9-]+)/gm)].map((match) => match[1] ?? ''));
}

test('every etcd minor fastplane drives is installed: 3.4, 3.5, 3.6 and 3.7', () => {
  for (const minor of ['3.4', '3.5', '3.6', '3.7']) newest(minor);
});

for (const version of versions) {
  describe(`etcd ${version}`, { timeout: 120_000 }, () => {
    test('knows every flag fastplane builds for its minor', () => {
      const args = memberFlags(
        { clientURL: 'https://127.0.0.1:2379', peerURL: 'https://127.0.0.1:2380', dataDir: '/d', tls: { certFile: 'c', keyFile: 'k', caFile: 'a', peerCertFile: 'pc', peerKeyFile: 'pk' } },
        { memberName: 'm', version, initialCluster: 'm=https://127.0.0.1:2380', initialClusterState: 'new', clusterToken: 't', maxLearners: 2, quotaBackendBytes: 1 << 30, strictReconfigCheck: false, forceNewCluster: true },
      );
      const known = helpFlags(findEtcdBinary(version));
      const unknown = args.filter((arg) => arg.startsWith('--')).map((arg) => arg.split('=')[0] ?? arg).filter((flag) => !known.has(flag));
      assert.deepEqual(unknown, [], `flags etcd ${version} does not define`);
    });

    test('a member starts with those flags, a learner joins and is promoted', async () => {
      const stateDir = tempDir('fastplane-versions-');
      const provider = new LocalProcessProvider({ stateDir, addressPrefix: PREFIX, findBinary: findEtcdBinary, stopGraceMs: 1500 });
      const tls = provider.clientTls('versions');
      const admin = new Etcd3Admin(tls === undefined ? {} : { credentials: () => readTlsCredentials(tls) });
      const world: CalibrationWorld = { provider, admin, cluster: 'versions', version };
      try {
        const { infra: leader } = await initSample(world, 1);
        await joinSample(world, 2, leader, initToken(1));
        const members = await admin.memberList([leader.clientURL]);
        assert.equal(members.length, 2);
        // etcd derives the first member's ID from its peer URL and the token alone, as fastplane computes it.
        const first = initialMemberId([leader.peerURL], tokenForLowMemberId(initToken(1), [leader.peerURL]));
        assert.ok(BigInt(first) < LOW_MEMBER_ID);
        assert.equal(members.find((member) => member.peerURLs.includes(leader.peerURL))?.id, first, JSON.stringify(members));
        assert.ok(members.every((member) => !member.isLearner), `both voters: ${JSON.stringify(members)}`);
        const status = await admin.status(leader.clientURL);
        assert.equal(status.version, version);
      } finally {
        await admin.close();
        await provider.destroyCluster('versions');
      }
    });
  });
}

/** The command lines of the etcd processes under a state dir, as argument lists. */
function memberCommandLines(stateDir: string): string[][] {
  return pidsUnder(stateDir).map((pid) => readFileSync(`/proc/${String(pid)}/cmdline`, 'utf8').split('\0')).filter((argv) => argv[0]?.endsWith('/etcd') === true);
}

describe('fastplane up on etcd 3.6 and 3.7', { timeout: 240_000 }, () => {
  test('up of three 3.6 members converges, each running the 3.6 command line', async () => {
    const version = newest('3.6');
    const env = newEnv('127.242');
    const up = await env.run(['up', '--name', 'v36', '--replicas', '3', '--version', version, '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const status = await env.run(['status', 'v36', '-o', 'json']);
    const doc = statusOf(status.stdout);
    assert.equal(doc.status.voters, 3);
    assert.deepEqual(doc.status.machines.map((m) => m.version), [version, version, version]);
    // The member that started the cluster sorts first, so a joiner asks it before any learner.
    const ids = doc.status.machines.map((m) => ({ role: m.role, id: BigInt(m.memberId ?? '-1') }));
    const init = ids.find((m) => m.role === 'init');
    assert.ok(init !== undefined && init.id < LOW_MEMBER_ID, JSON.stringify(doc.status.machines));
    assert.ok(ids.every((m) => m === init || m.id > init.id), JSON.stringify(doc.status.machines));
    const lines = memberCommandLines(env.stateDir);
    assert.equal(lines.length, 3);
    for (const argv of lines) {
      assert.ok(argv.includes('--max-learners') && argv.includes('--watch-progress-notify-interval'), argv.join(' '));
      assert.ok(!argv.some((arg) => arg.startsWith('--experimental-') || arg === '--logger'), argv.join(' '));
    }
  });

  test('--etcd-binaries: a version installed nowhere else runs from that directory, and its backups use its etcdutl', async () => {
    const version = newest('3.7');
    const dir = tempDir('fastplane-own-etcd-');
    for (const tool of ['etcd', 'etcdctl', 'etcdutl']) copyFileSync(join(dirname(findEtcdBinary(version)), tool), join(dir, tool));
    // An empty cache: only Debian's 3.4.23 is installed, so the version exists only in the directory.
    const noCache = { FASTPLANE_ETCD_CACHE: tempDir('fastplane-empty-cache-') };
    const env = newEnv('127.243');
    const up = await env.run(['up', '--name', 'own', '--replicas', '1', '--version', version, '--etcd-binaries', dir, '--timeout', '60s', '-o', 'json'], noCache);
    assert.equal(up.code, 0, up.stderr);
    const pids = pidsUnder(env.stateDir).filter((pid) => readFileSync(`/proc/${String(pid)}/cmdline`, 'utf8').includes('--data-dir'));
    assert.equal(pids.length, 1);
    assert.equal(readlinkSync(`/proc/${String(pids[0])}/exe`), join(dir, 'etcd'));
    const status = statusOf((await env.run(['status', 'own', '-o', 'json'], noCache)).stdout);
    assert.equal(status.spec.etcd.binaries, dir);
    const backup = await env.run(['backup', 'own', '-o', 'json'], noCache);
    assert.equal(backup.code, 0, backup.stderr);
    assert.equal((JSON.parse(backup.stdout) as { etcdVersion: string }).etcdVersion, version);
  });
});

describe('--etcd-binaries and versions without a binary are bad input (exit 2)', () => {
  test('a directory whose etcd is another version: exit 2 naming both versions', async () => {
    const v36 = newest('3.6');
    const v37 = newest('3.7');
    const dir = tempDir('fastplane-other-etcd-');
    copyFileSync(findEtcdBinary(v37), join(dir, 'etcd'));
    const env = newEnv('127.244');
    const run = await env.run(['up', '--name', 'mismatch', '--version', v36, '--etcd-binaries', dir]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, new RegExp(`is etcd ${v37.replaceAll('.', '\\.')}, but spec.version is ${v36.replaceAll('.', '\\.')}`));
    assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
    assert.deepEqual(env.controlPlanes(), [], 'nothing recorded');
  });

  test('a directory without etcd: exit 2', async () => {
    const dir = tempDir('fastplane-no-etcd-');
    mkdirSync(join(dir, 'bin'));
    const env = newEnv('127.244');
    const run = await env.run(['up', '--name', 'noetcd', '--version', newest('3.6'), '--etcd-binaries', dir]);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /holds no etcd binary/);
  });

  test('a version no installed binary reports: exit 2 naming the install command', async () => {
    const env = newEnv('127.244');
    const run = await env.run(['up', '--name', 'missing', '--version', '3.9.99']);
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /etcd 3\.9\.99 is not installed/);
    assert.match(run.stderr, /bash scripts\/install-etcd\.sh/);
  });
});

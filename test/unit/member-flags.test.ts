import assert from 'node:assert/strict';
import { test } from 'node:test';
import { memberFlags, minorFlags, WATCH_PROGRESS_NOTIFY_INTERVAL } from '../../src/adapters/host/member-flags.ts';
import type { MemberLaunch } from '../../src/ports/machine-provider.ts';

// The etcd command line per minor. Each minor refuses to start on a flag it does not define, so the
// lists below are the flags each one lacks (docs/etcd-behaviour.md, "Member command line per minor").

const placement = {
  clientURL: 'https://127.0.0.1:2379',
  peerURL: 'https://127.0.0.1:2380',
  dataDir: '/var/lib/etcd/m1',
  tls: {
    certFile: '/pki/server.crt',
    keyFile: '/pki/server.key',
    caFile: '/pki/ca.crt',
    peerCertFile: '/pki/peer.crt',
    peerKeyFile: '/pki/peer.key',
  },
};

function launch(version: string, extra: Partial<MemberLaunch> = {}): MemberLaunch {
  return {
    memberName: 'm1',
    version,
    initialCluster: 'm1=https://127.0.0.1:2380',
    initialClusterState: 'new',
    clusterToken: 'token',
    maxLearners: 3,
    ...extra,
  };
}

/** Flag names only (`--name`), for membership checks. */
function names(args: string[]): string[] {
  return args.filter((arg) => arg.startsWith('--')).map((arg) => arg.split('=')[0] ?? arg);
}

/** The value right after a flag. */
function valueOf(args: string[], flag: string): string | undefined {
  const at = args.indexOf(flag);
  return at < 0 ? undefined : args[at + 1];
}

// Only in 3.6 and later: 3.4 and 3.5 stop at `flag provided but not defined`.
const NEW_IN_36 = ['--feature-gates', '--log-format', '--max-learners', '--watch-progress-notify-interval'];
// Removed in 3.6 (the v2 API and the v2 proxy).
const REMOVED_IN_36 = ['--enable-v2', '--experimental-enable-v2v3', '--proxy', '--proxy-failure-wait', '--proxy-refresh-interval'];

test('etcd 3.4: zap to stderr, the experimental watch progress flag, no flag of 3.6', () => {
  const args = memberFlags(placement, launch('3.4.23'));
  assert.equal(valueOf(args, '--logger'), 'zap');
  assert.equal(valueOf(args, '--log-outputs'), 'stderr');
  assert.equal(valueOf(args, '--experimental-watch-progress-notify-interval'), WATCH_PROGRESS_NOTIFY_INTERVAL);
  for (const flag of NEW_IN_36) assert.ok(!names(args).includes(flag), `${flag} reached 3.4`);
});

test('etcd 3.5: zap is already the default; the experimental watch progress flag; no flag of 3.6', () => {
  for (const version of ['3.5.16', '3.5.36']) {
    const args = memberFlags(placement, launch(version));
    assert.ok(!names(args).includes('--logger'), 'no --logger: 3.5 logs with zap to stderr');
    assert.equal(valueOf(args, '--experimental-watch-progress-notify-interval'), WATCH_PROGRESS_NOTIFY_INTERVAL);
    for (const flag of NEW_IN_36) assert.ok(!names(args).includes(flag), `${flag} reached ${version}`);
  }
});

test('etcd 3.6: --max-learners and the renamed watch progress flag; nothing 3.6 removed', () => {
  const args = memberFlags(placement, launch('3.6.17'));
  assert.equal(valueOf(args, '--max-learners'), '3');
  assert.equal(valueOf(args, '--watch-progress-notify-interval'), WATCH_PROGRESS_NOTIFY_INTERVAL);
  assert.ok(!names(args).includes('--experimental-watch-progress-notify-interval'), 'the deprecated spelling is not used');
  for (const flag of REMOVED_IN_36) assert.ok(!names(args).includes(flag), `${flag} reached 3.6`);
  assert.ok(!names(args).includes('--logger'));
});

test('etcd 3.7: no --experimental-* flag at all, with every optional flag set', () => {
  const args = memberFlags(placement, launch('3.7.4', { quotaBackendBytes: 1 << 30, forceNewCluster: true, strictReconfigCheck: false }));
  const experimental = names(args).filter((flag) => flag.startsWith('--experimental-'));
  assert.deepEqual(experimental, []);
  for (const flag of REMOVED_IN_36) assert.ok(!names(args).includes(flag), `${flag} reached 3.7`);
  assert.equal(valueOf(args, '--max-learners'), '3');
  assert.equal(valueOf(args, '--watch-progress-notify-interval'), WATCH_PROGRESS_NOTIFY_INTERVAL);
  assert.ok(args.includes('--force-new-cluster') && args.includes('--strict-reconfig-check=false'));
});

test('a minor beyond the table takes the newest row, so no --experimental-* flag reaches it', () => {
  assert.deepEqual(minorFlags('3.8.0'), minorFlags('3.7.4'));
  assert.deepEqual(minorFlags('4.0.0'), minorFlags('3.7.4'));
  assert.deepEqual(minorFlags('3.3.25'), minorFlags('3.4.23'));
  assert.deepEqual(minorFlags('3.6.0'), minorFlags('3.6.17'));
  assert.notDeepEqual(minorFlags('3.5.36'), minorFlags('3.6.0'));
});

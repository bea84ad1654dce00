import assert from 'node:assert/strict';
import { test } from 'node:test';
import { initialMemberId, LOW_MEMBER_ID, peerURLsIn, tokenForLowMemberId } from '../../src/cluster/member-id.ts';
import { launchFor } from '../../src/cluster/member-launch.ts';
import type { ControlPlaneRecord, MachineRecord } from '../../src/domain/machine.ts';
import { defaultControlPlane } from '../../src/api/control-plane.ts';

test('an initial member ID is what etcd 3.6.17 reported for that peer URL and token', () => {
  // etcd --name v --initial-advertise-peer-urls http://127.0.0.1:23991 --initial-cluster-token fastplane-vector
  // listed member ID 13365340195410000491; the live check on every version is in test/integration/etcd-versions.test.ts.
  assert.equal(initialMemberId(['http://127.0.0.1:23991'], 'fastplane-vector'), '13365340195410000491');
  // The peer URLs are sorted before hashing, as etcd does.
  assert.equal(initialMemberId(['https://b:2380', 'https://a:2380'], 't'), initialMemberId(['https://a:2380', 'https://b:2380'], 't'));
});

test('the chosen token puts the first member below 2^50, the same token each time', () => {
  for (let i = 0; i < 20; i++) {
    const urls = [`https://127.0.${String(i)}.1:2380`];
    const token = tokenForLowMemberId(`fastplane-c${String(i)}-1700000000000`, urls);
    assert.ok(token.startsWith(`fastplane-c${String(i)}-1700000000000-`), token);
    assert.ok(BigInt(initialMemberId(urls, token)) < LOW_MEMBER_ID);
    assert.equal(tokenForLowMemberId(`fastplane-c${String(i)}-1700000000000`, urls), token);
  }
});

test('peerURLsIn reads one member\'s URLs from --initial-cluster', () => {
  assert.deepEqual(peerURLsIn('a=https://1:2380,b=https://2:2380,a=https://3:2380', 'a'), ['https://1:2380', 'https://3:2380']);
  assert.deepEqual(peerURLsIn('a=https://1:2380', 'b'), []);
});

test('a member that starts a cluster gets the low-ID token; a joiner keeps the record\'s token', () => {
  const cp: ControlPlaneRecord = { name: 'c', manifest: defaultControlPlane('c'), generation: 1, createdAt: 0, clusterToken: 'fastplane-c-0', nextOrdinal: 4 };
  const machine = { name: 'c-1', version: '3.6.17' } as MachineRecord; // launchFor reads only these
  const peer = 'https://127.0.0.1:2380';
  const init = launchFor(cp, machine, `c-1=${peer}`, 'new');
  assert.ok(BigInt(initialMemberId([peer], init.clusterToken)) < LOW_MEMBER_ID, init.clusterToken);
  assert.notEqual(init.clusterToken, cp.clusterToken);
  assert.equal(launchFor(cp, machine, `c-0=https://127.0.0.2:2380,c-1=${peer}`, 'existing').clusterToken, cp.clusterToken);
  // A restore starts a cluster too: the token etcdutl restores with is the same low-ID one.
  const restored = launchFor({ ...cp, restoreFrom: { file: '/s', sha256: 'x' } }, machine, `c-1=${peer}`, 'new');
  assert.equal(restored.clusterToken, init.clusterToken);
  assert.ok(restored.restoreFrom !== undefined);
});

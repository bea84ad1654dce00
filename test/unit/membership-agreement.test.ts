import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultControlPlane } from '../../src/api/control-plane.ts';
import { membershipAgrees, membershipDifference } from '../../src/care/membership-agreement.ts';
import { relaunchFor } from '../../src/cluster/member-launch.ts';
import type { ControlPlaneRecord, MachineRecord } from '../../src/domain/machine.ts';
import type { EtcdAdmin, EtcdMember, EtcdMemberStatus } from '../../src/ports/etcd-admin.ts';

const member = (id: string, isLearner = false, name = id): EtcdMember => ({ id, name, peerURLs: [`https://${id}:2380`], clientURLs: name === '' ? [] : [`https://${id}:2379`], isLearner });
const ALL = [member('1'), member('2'), member('3'), member('4', true, '')];

/** Each endpoint answers its own member list and applied index. */
function admin(views: Record<string, { list: EtcdMember[]; applied: number }>): EtcdAdmin {
  const view = (endpoint: string): { list: EtcdMember[]; applied: number } => views[endpoint] ?? { list: [], applied: 0 };
  return {
    memberList: (endpoints: readonly string[]) => Promise.resolve(view(endpoints[0] ?? '').list),
    status: (endpoint: string) => Promise.resolve({ raftAppliedIndex: view(endpoint).applied } as EtcdMemberStatus),
  } as unknown as EtcdAdmin;
}

const own = { name: 'm-2', endpoint: 'own' };
const leader = { name: 'm-1', endpoint: 'leader' };
const kindOf = (r: Awaited<ReturnType<typeof membershipAgrees>>): string => (r.kind === 'Error' || r.kind === 'RequeueAfter' ? `${r.kind} ${r.reason}` : r.kind);

test('member lists agree on IDs, roles and peer URLs; names and client URLs are left out', () => {
  assert.equal(membershipDifference(ALL, [...ALL].reverse().map((m) => ({ ...m, name: '', clientURLs: [] }))), undefined);
  assert.match(membershipDifference(ALL.slice(0, 3), ALL) ?? '', /only the leader lists 4 learner/);
  assert.match(membershipDifference(ALL.map((m) => (m.id === '4' ? { ...m, isLearner: false } : m)), ALL) ?? '', /only it lists 4 voter.*only the leader lists 4 learner/);
});

test('a restarted member that lists other members: MembershipDiverged once it applied as far as the leader, asked again while it catches up', async () => {
  assert.equal(kindOf(await membershipAgrees(admin({ own: { list: ALL, applied: 9 }, leader: { list: ALL, applied: 9 } }), own, leader)), 'Done');
  assert.equal(kindOf(await membershipAgrees(admin({ own: { list: ALL.slice(0, 3), applied: 9 }, leader: { list: ALL, applied: 9 } }), own, leader)), 'Error MembershipDiverged');
  assert.equal(kindOf(await membershipAgrees(admin({ own: { list: ALL.slice(0, 3), applied: 5 }, leader: { list: ALL, applied: 9 } }), own, leader)), 'RequeueAfter MembershipCatchingUp');
});

test('a restart in place never lowers the learner limit a 3.6 member last ran; below 3.6 the limit is 1', () => {
  const manifest = defaultControlPlane('c');
  manifest.spec.etcd.maxLearners = 1;
  const cp: ControlPlaneRecord = { name: 'c', manifest, generation: 1, createdAt: 0, clusterToken: 'fastplane-c-0', nextOrdinal: 4 };
  const machine = (version: string, maxLearners?: number): MachineRecord => ({ name: 'c-1', version, peerURL: 'https://127.0.0.1:2380', ...(maxLearners === undefined ? {} : { maxLearners }) }) as MachineRecord;
  assert.equal(relaunchFor(cp, machine('3.6.17', 3)).maxLearners, 3);
  assert.equal(relaunchFor(cp, machine('3.6.17')).maxLearners, 1);
  assert.equal(relaunchFor({ ...cp, manifest: { ...manifest, spec: { ...manifest.spec, etcd: { ...manifest.spec.etcd, maxLearners: 5 } } } }, machine('3.6.17', 3)).maxLearners, 5);
  assert.equal(relaunchFor(cp, machine('3.5.36', 3)).maxLearners, 1);
});

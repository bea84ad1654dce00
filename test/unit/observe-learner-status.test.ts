import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { ControlPlaneRecord, MachineRecord } from '../../src/domain/machine.ts';
import type { EtcdAdmin, EtcdMember, EtcdMemberStatus } from '../../src/ports/etcd-admin.ts';
import type { InfraProvider } from '../../src/ports/machine-provider.ts';
import type { StateStore } from '../../src/ports/state-store.ts';
import { LEARNER_STATUS_TIMEOUT_MS, observe } from '../../src/cluster/observe.ts';

// A learner receiving its snapshot answers nothing until it has applied it: a pass asks it with a
// short deadline, so the next add and every promotion are not held for the adapter's full one.

const url = (n: number): string => `http://127.0.0.1:${String(23790 + n)}`;
const member = (n: number, isLearner: boolean): EtcdMember => ({ id: String(n), name: `c-${String(n)}`, peerURLs: [`http://127.0.0.1:${String(23800 + n)}`], clientURLs: [url(n)], isLearner });
const machine = (n: number): MachineRecord => ({ cluster: 'c', name: `c-${String(n)}`, ordinal: n, version: '3.6.17', templateHash: 'h', createdAt: 0, phase: n === 1 ? 'Voter' : 'Learner', phaseTimes: {}, clientURL: url(n) });

test('a learner is asked for its status with the short deadline, a voter with the adapter default', async () => {
  const members = [member(1, false), member(2, true), member(3, true)];
  const asked = new Map<string, number | undefined>();
  const status = (endpoint: string, options?: { timeoutMs?: number }): Promise<EtcdMemberStatus> => {
    asked.set(endpoint, options?.timeoutMs);
    if (endpoint === url(3)) return Promise.reject(new Error('deadline exceeded'));
    const id = endpoint === url(1) ? '1' : '2';
    return Promise.resolve({ memberId: id, leaderId: '1', raftIndex: 10, raftAppliedIndex: 10, raftTerm: 2, isLearner: id !== '1', version: '3.6.17', dbSize: 1, errors: [] });
  };
  const etcd: Pick<EtcdAdmin, 'memberList' | 'status' | 'alarms'> = { memberList: () => Promise.resolve(members), status, alarms: () => Promise.resolve([]) };
  const cp = { name: 'c', nextOrdinal: 4, initMachine: 'c-1' } as unknown as ControlPlaneRecord;
  const store: Pick<StateStore, 'getControlPlane' | 'listMachines'> = { getControlPlane: () => Promise.resolve(cp), listMachines: () => Promise.resolve([1, 2, 3].map(machine)) };
  const provider: Pick<InfraProvider, 'describe'> = {
    describe: (_cluster, name) => {
      const n = Number(name.slice(2));
      return Promise.resolve({ name, address: '127.0.0.1', clientURL: url(n), peerURL: `http://127.0.0.1:${String(23800 + n)}`, state: 'Provisioned' as const, memberRunning: true });
    },
  };
  const observed = await observe({ cluster: 'c', etcd: etcd as EtcdAdmin, store: store as StateStore, provider: provider as InfraProvider });

  assert.equal(asked.get(url(1)), undefined, 'the voter gets the adapter deadline');
  assert.equal(asked.get(url(2)), LEARNER_STATUS_TIMEOUT_MS);
  assert.equal(asked.get(url(3)), LEARNER_STATUS_TIMEOUT_MS);
  assert.ok(observed.members.ok);
  const silent = observed.members.list.find((m) => m.id === '3');
  assert.equal(silent?.status?.ok, false, 'a learner that does not answer in time is a failed reading, not a stalled pass');
});

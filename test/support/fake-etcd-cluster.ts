import type { Clock } from '../../src/ports/clock.ts';
import type { EtcdAdmin, EtcdAlarm, EtcdMember, EtcdMemberStatus } from '../../src/ports/etcd-admin.ts';

// Care's steps judged without etcd: a clock that only moves when slept on, and voters on fake endpoints.

export function virtualClock(): Clock & { slept: number[] } {
  let now = 0;
  const slept: number[] = [];
  return {
    slept,
    now: () => now,
    sleep: (ms) => {
      slept.push(ms);
      now += ms;
      return Promise.resolve();
    },
  };
}

/** Voters (and learners) on fake endpoints: each answers unless down; leadership moves at once. */
export class FakeCluster {
  leader: string;
  readonly down = new Set<string>();
  listFails = false;
  readonly members: EtcdMember[];
  readonly moves: string[] = [];
  alarms: EtcdAlarm[] = [];

  constructor(ids: string[], learners: string[] = []) {
    this.leader = ids[0] ?? '';
    const member = (id: string, isLearner: boolean): EtcdMember => ({ id, name: id, peerURLs: [`http://${id}:2380`], clientURLs: [`http://${id}:2379`], isLearner });
    this.members = [...ids.map((id) => member(id, false)), ...learners.map((id) => member(id, true))];
  }

  readonly admin = {
    alarms: () => Promise.resolve(this.alarms),
    memberList: () => (this.listFails ? Promise.reject(new Error('context deadline exceeded')) : Promise.resolve(this.members)),
    status: (endpoint: string): Promise<EtcdMemberStatus> => {
      const id = new URL(endpoint).hostname;
      if (this.down.has(id)) return Promise.reject(new Error('connection refused'));
      return Promise.resolve({ memberId: id, leaderId: this.leader, raftIndex: 1, raftAppliedIndex: 1, raftTerm: 1, isLearner: false, version: '3.5.16', dbSize: 0, errors: [] });
    },
    moveLeader: (_endpoint: string, target: string) => {
      this.moves.push(target);
      this.leader = target;
      return Promise.resolve();
    },
  } as unknown as EtcdAdmin;
}

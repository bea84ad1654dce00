import type { EtcdAdmin, EtcdAlarm, EtcdMember, EtcdMemberStatus } from '../ports/etcd-admin.ts';
import type { CreateMachineRequest, InfraProvider, MachineInfra, MemberLaunch } from '../ports/machine-provider.ts';
import type { ModelWorld } from './model-world.ts';
import { drawDuration } from '../api/duration.ts';

/**
 * One call into the model as a client sees it: it takes the configured latency, and its effect lands
 * halfway through. Membership changes are bracketed so that the model can tell when two overlap
 * (invariant 3), whichever code path issued them.
 */
async function call<T>(world: ModelWorld, run: () => T, change?: string): Promise<T> {
  const { callLatency } = world.timings;
  const latency = callLatency.maxMs > 0 ? drawDuration(callLatency, world.random) : 0;
  const half = Math.floor(latency / 2);
  if (change !== undefined) world.beginChange(change);
  try {
    if (latency > 0) await world.clock.sleep(half);
    else await Promise.resolve();
    let result: T;
    try {
      result = run();
    } finally {
      if (latency > 0) await world.clock.sleep(latency - half);
    }
    return result;
  } finally {
    if (change !== undefined) world.endChange();
  }
}

/** The model behind the EtcdAdmin port; the contract suite runs the same cases here and on real etcd. */
export class ModelEtcdAdmin implements EtcdAdmin {
  constructor(private readonly world: ModelWorld) {}

  memberList(endpoints: readonly string[], options?: { linearizable: boolean }): Promise<EtcdMember[]> {
    return call(this.world, () => this.world.memberList(endpoints, options?.linearizable ?? true));
  }

  addLearner(endpoints: readonly string[], peerURL: string): Promise<{ member: EtcdMember; members: EtcdMember[] }> {
    return call(this.world, () => this.world.addLearner(endpoints, peerURL), `addLearner ${peerURL}`);
  }

  promoteLearner(endpoints: readonly string[], memberId: string): Promise<void> {
    return call(this.world, () => { this.world.promoteLearner(endpoints, memberId); }, `promoteLearner ${memberId}`);
  }

  removeMember(endpoints: readonly string[], memberId: string): Promise<void> {
    return call(this.world, () => { this.world.removeMember(endpoints, memberId); }, `removeMember ${memberId}`);
  }

  moveLeader(leaderEndpoint: string, targetMemberId: string): Promise<void> {
    return call(this.world, () => { this.world.moveLeader(leaderEndpoint, targetMemberId); }, `moveLeader ${targetMemberId}`);
  }

  status(endpoint: string): Promise<EtcdMemberStatus> {
    return call(this.world, () => this.world.status(endpoint));
  }

  alarms(endpoints: readonly string[]): Promise<EtcdAlarm[]> {
    return call(this.world, () => this.world.alarms(endpoints));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Machines of the model world behind the InfraProvider port. */
export class ModelProvider implements InfraProvider {
  constructor(private readonly world: ModelWorld) {}

  create(request: CreateMachineRequest): Promise<MachineInfra> {
    return call(this.world, () => this.world.createMachine(request));
  }

  describe(cluster: string, name: string): Promise<MachineInfra | undefined> {
    return call(this.world, () => this.world.describeMachine(cluster, name));
  }

  /**
   * Provisioning in the model moves on with the virtual clock. No call latency either: the executor
   * asks every pass, and that must not change what a seeded run does.
   */
  provision(cluster: string, name: string): Promise<MachineInfra | undefined> {
    return Promise.resolve(this.world.describeMachine(cluster, name));
  }

  /**
   * Starting a member on an empty data dir is part of a membership change (init, join): it is
   * bracketed too. A restart on a data dir brings back a member etcd already has and changes nothing.
   */
  startMember(cluster: string, name: string, launch: MemberLaunch): Promise<void> {
    const change = this.world.hasMemberData(cluster, name) ? undefined : `startMember ${name}`;
    return call(this.world, () => { this.world.startMember(cluster, name, launch); }, change);
  }

  stopMember(cluster: string, name: string): Promise<void> {
    return call(this.world, () => { this.world.stopMember(cluster, name); });
  }

  delete(cluster: string, name: string): Promise<void> {
    return call(this.world, () => { this.world.deleteMachine(cluster, name); });
  }
}

import type { EtcdAdmin, EtcdAlarm, EtcdMember, EtcdMemberStatus } from '../ports/etcd-admin.ts';
import type { CreateMachineRequest, InfraProvider, MachineInfra, MemberLaunch } from '../ports/infra-provider.ts';
import type { ModelWorld } from './model-world.ts';

/** The model behind the EtcdAdmin port; the contract suite runs the same cases here and on real etcd. */
export class ModelEtcdAdmin implements EtcdAdmin {
  constructor(private readonly world: ModelWorld) {}

  memberList(endpoints: readonly string[], options?: { linearizable: boolean }): Promise<EtcdMember[]> {
    return Promise.resolve().then(() => this.world.memberList(endpoints, options?.linearizable ?? true));
  }

  addLearner(endpoints: readonly string[], peerURL: string): Promise<{ member: EtcdMember; members: EtcdMember[] }> {
    return Promise.resolve().then(() => this.world.addLearner(endpoints, peerURL));
  }

  promoteLearner(endpoints: readonly string[], memberId: string): Promise<void> {
    return Promise.resolve().then(() => {
      this.world.promoteLearner(endpoints, memberId);
    });
  }

  removeMember(endpoints: readonly string[], memberId: string): Promise<void> {
    return Promise.resolve().then(() => {
      this.world.removeMember(endpoints, memberId);
    });
  }

  moveLeader(leaderEndpoint: string, targetMemberId: string): Promise<void> {
    return Promise.resolve().then(() => {
      this.world.moveLeader(leaderEndpoint, targetMemberId);
    });
  }

  status(endpoint: string): Promise<EtcdMemberStatus> {
    return Promise.resolve().then(() => this.world.status(endpoint));
  }

  alarms(endpoints: readonly string[]): Promise<EtcdAlarm[]> {
    return Promise.resolve().then(() => this.world.alarms(endpoints));
  }

  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Machines of the model world behind the InfraProvider port. */
export class ModelProvider implements InfraProvider {
  constructor(private readonly world: ModelWorld) {}

  create(request: CreateMachineRequest): Promise<MachineInfra> {
    return Promise.resolve().then(() => this.world.createMachine(request));
  }

  describe(cluster: string, name: string): Promise<MachineInfra | undefined> {
    return Promise.resolve().then(() => this.world.describeMachine(cluster, name));
  }

  startMember(cluster: string, name: string, launch: MemberLaunch): Promise<void> {
    return Promise.resolve().then(() => {
      this.world.startMember(cluster, name, launch);
    });
  }

  stopMember(cluster: string, name: string): Promise<void> {
    return Promise.resolve().then(() => {
      this.world.stopMember(cluster, name);
    });
  }

  delete(cluster: string, name: string): Promise<void> {
    return Promise.resolve().then(() => {
      this.world.deleteMachine(cluster, name);
    });
  }
}

import type { DurationRange } from '../api/duration.ts';
import { quorum } from '../domain/quorum.ts';
import type { Clock } from '../ports/clock.ts';
import { EtcdAdminError, type EtcdAlarm, type EtcdErrorKind, type EtcdMember, type EtcdMemberStatus } from '../ports/etcd-admin.ts';
import type { CreateMachineRequest, MachineInfra, MemberLaunch } from '../ports/infra-provider.ts';
import { drawDuration } from './random.ts';

/**
 * Timings measured in etcd-lab.md (etcd 3.4.23 / 3.5.16, loopback, empty database) unless the caller
 * overrides them: learner start to promotable 0.2-0.45 s, the 5 s peer-connection rule for adds and
 * voter removals, about 1.4 s for a new leader after the old one goes.
 */
export interface ModelTimings {
  provisioning: DurationRange;
  deletion: DurationRange;
  catchUp: DurationRange;
  peerHealthGateMs: number;
  electionMs: number;
  /** Raft entries per second written by clients, so a stalled learner falls visibly behind. */
  writesPerSecond: number;
}

export const MEASURED_TIMINGS: ModelTimings = {
  provisioning: { minMs: 0, maxMs: 0 },
  deletion: { minMs: 0, maxMs: 0 },
  catchUp: { minMs: 200, maxMs: 450 },
  peerHealthGateMs: 5000,
  electionMs: 1400,
  writesPerSecond: 20,
};

interface ModelMachine {
  cluster: string;
  name: string;
  address: string;
  readyAt: number;
  failProvisioning: boolean;
  neverStarts: boolean;
  running: boolean;
  version: string;
  startedAt?: number;
  deleteAt?: number;
  /** The member whose data this machine's disk holds. */
  dataMemberId?: string;
}

interface ModelMember {
  id: string;
  name: string;
  peerURL: string;
  clientURL?: string;
  isLearner: boolean;
  /** When the leader's connection to it started (for the 5 s rule); undefined while not running. */
  connectedSince?: number;
  caughtUpAt: number;
  stalledAtIndex?: number;
}

interface ModelCluster {
  members: Map<string, ModelMember>;
  leaderId: string | undefined;
  /** No leader until this time (election in progress). */
  electionUntil: number;
  baseIndex: number;
  createdAt: number;
  maxLearners: number;
  alarms: EtcdAlarm[];
}

/** Unsafe changes the model saw applied: the oracle for invariants 2, 4 and 6. */
export interface ModelViolation {
  at: number;
  rule: string;
  detail: string;
}

function fail(kind: EtcdErrorKind, message: string): never {
  throw new EtcdAdminError(kind, message);
}

/**
 * An executable model of etcd membership and of machines, on the caller's clock, encoding the rules
 * measured on real etcd: one learner (or --max-learners), promote refused until caught up, the 5 s
 * connection rule, quorum loss when healthy voters < quorum, unstarted members, removed members exit,
 * uint64 member IDs as decimal strings.
 */
export class ModelWorld {
  readonly machines = new Map<string, ModelMachine>();
  readonly clusters = new Map<string, ModelCluster>();
  readonly violations: ModelViolation[] = [];
  initCount = 0;

  constructor(
    readonly clock: Clock,
    readonly random: () => number,
    readonly timings: ModelTimings = MEASURED_TIMINGS,
    private readonly slots = new Map<string, number>(),
  ) {}

  // ---- faults -------------------------------------------------------------------------------------

  killMember(name: string): void {
    const machine = this.machineNamed(name);
    if (machine) machine.running = false;
    this.refreshConnections();
  }

  failProvisioning(name: string): void {
    const machine = this.machineNamed(name);
    if (machine) machine.failProvisioning = true;
  }

  neverStart(name: string): void {
    const machine = this.machineNamed(name);
    if (machine) machine.neverStarts = true;
  }

  stallLearner(name: string): void {
    const machine = this.machineNamed(name);
    const found = machine ? this.memberOfMachine(machine) : undefined;
    if (found?.member.isLearner) found.member.stalledAtIndex = Math.max(0, this.raftIndex(found.cluster) - 1);
  }

  raiseAlarm(clusterName: string, alarm: EtcdAlarm): void {
    this.clusters.get(clusterName)?.alarms.push(alarm);
  }

  machineNamed(name: string): ModelMachine | undefined {
    return [...this.machines.values()].find((m) => m.name === name);
  }

  // ---- infrastructure -----------------------------------------------------------------------------

  private slotOf(cluster: string): number {
    let slot = this.slots.get(cluster);
    if (slot === undefined) {
      slot = this.slots.size + 1;
      this.slots.set(cluster, slot);
    }
    return slot;
  }

  createMachine(request: CreateMachineRequest): MachineInfra {
    const key = `${request.cluster}/${request.name}`;
    let machine = this.machines.get(key);
    if (!machine) {
      machine = {
        cluster: request.cluster,
        name: request.name,
        address: `10.${String(this.slotOf(request.cluster))}.${String(Math.floor(request.ordinal / 250))}.${String((request.ordinal % 250) + 1)}`,
        readyAt: this.clock.now() + drawDuration(this.timings.provisioning, this.random),
        failProvisioning: false,
        neverStarts: false,
        running: false,
        version: '',
      };
      this.machines.set(key, machine);
    }
    return this.infraOf(machine);
  }

  private infraOf(machine: ModelMachine): MachineInfra {
    const now = this.clock.now();
    let state: MachineInfra['state'] = now >= machine.readyAt ? 'Provisioned' : 'Provisioning';
    if (machine.failProvisioning && state === 'Provisioned') state = 'Failed';
    if (machine.deleteAt !== undefined) state = 'Deleting';
    const infra: MachineInfra = {
      name: machine.name,
      address: machine.address,
      clientURL: `http://${machine.address}:2379`,
      peerURL: `http://${machine.address}:2380`,
      state,
      memberRunning: machine.running,
    };
    if (state === 'Failed') infra.failureMessage = 'simulated provisioning failure';
    if (machine.startedAt !== undefined) infra.memberStartedAt = machine.startedAt;
    return infra;
  }

  describeMachine(cluster: string, name: string): MachineInfra | undefined {
    const key = `${cluster}/${name}`;
    const machine = this.machines.get(key);
    if (!machine) return undefined;
    if (machine.deleteAt !== undefined && this.clock.now() >= machine.deleteAt) {
      this.machines.delete(key);
      return undefined;
    }
    return this.infraOf(machine);
  }

  deleteMachine(cluster: string, name: string): void {
    const machine = this.machines.get(`${cluster}/${name}`);
    if (!machine || machine.deleteAt !== undefined) return;
    const found = this.memberOfMachine(machine);
    if (found) this.violations.push({ at: this.clock.now(), rule: 'invariant-5', detail: `machine ${name} deleted while member ${found.member.id} exists` });
    machine.running = false;
    machine.deleteAt = this.clock.now() + drawDuration(this.timings.deletion, this.random);
    this.refreshConnections();
  }

  stopMember(cluster: string, name: string): void {
    const machine = this.machines.get(`${cluster}/${name}`);
    if (machine) machine.running = false;
    this.refreshConnections();
  }

  startMember(cluster: string, name: string, launch: MemberLaunch): void {
    const machine = this.machines.get(`${cluster}/${name}`);
    if (!machine || this.infraOf(machine).state !== 'Provisioned') throw new Error(`machine ${name} is not provisioned`);
    if (machine.running) return;
    const now = this.clock.now();
    machine.version = launch.version;
    machine.startedAt = now;
    if (machine.neverStarts) return;
    const peerURL = `http://${machine.address}:2380`;
    const state = this.clusters.get(cluster);
    if (launch.initialClusterState === 'new' && (!state || state.members.size === 0) && machine.dataMemberId === undefined) {
      this.initCluster(cluster, machine, launch, peerURL);
      return;
    }
    const member = state ? [...state.members.values()].find((m) => m.peerURL === peerURL) : undefined;
    if (!state || !member) return; // etcd exits: this peer URL was never added
    const restart = machine.dataMemberId === member.id;
    const listed = launch.initialCluster.split(',').filter(Boolean).length;
    if (!restart && listed !== state.members.size) return; // etcd exits: "member count is unequal"
    machine.running = true;
    machine.dataMemberId = member.id;
    member.name = launch.memberName;
    member.clientURL = `http://${machine.address}:2379`;
    member.connectedSince = now;
    if (!restart) member.caughtUpAt = now + drawDuration(this.timings.catchUp, this.random);
    this.refreshLeader(cluster, state);
  }

  private initCluster(cluster: string, machine: ModelMachine, launch: MemberLaunch, peerURL: string): void {
    const now = this.clock.now();
    const id = this.newMemberId();
    this.initCount++;
    const member: ModelMember = { id, name: launch.memberName, peerURL, clientURL: `http://${machine.address}:2379`, isLearner: false, connectedSince: now, caughtUpAt: now };
    this.clusters.set(cluster, {
      members: new Map([[id, member]]),
      leaderId: id,
      electionUntil: now + this.timings.electionMs,
      baseIndex: 4,
      createdAt: now,
      maxLearners: launch.maxLearners,
      alarms: [],
    });
    machine.running = true;
    machine.dataMemberId = id;
  }

  private newMemberId(): string {
    const high = BigInt(Math.floor(this.random() * 2 ** 32));
    const low = BigInt(Math.floor(this.random() * 2 ** 32));
    return ((high << 32n) | low | 1n).toString();
  }

  // ---- etcd ---------------------------------------------------------------------------------------

  private memberOfMachine(machine: ModelMachine): { cluster: string; member: ModelMember } | undefined {
    const state = this.clusters.get(machine.cluster);
    const peerURL = `http://${machine.address}:2380`;
    const member = state ? [...state.members.values()].find((m) => m.peerURL === peerURL) : undefined;
    return member ? { cluster: machine.cluster, member } : undefined;
  }

  private machineOfMember(cluster: string, member: ModelMember): ModelMachine | undefined {
    return [...this.machines.values()].find((m) => m.cluster === cluster && `http://${m.address}:2380` === member.peerURL);
  }

  private isRunning(cluster: string, member: ModelMember): boolean {
    const machine = this.machineOfMember(cluster, member);
    return machine?.running === true && machine.dataMemberId === member.id;
  }

  private raftIndex(cluster: string): number {
    const state = this.clusters.get(cluster);
    if (!state) return 0;
    return state.baseIndex + Math.floor(((this.clock.now() - state.createdAt) / 1000) * this.timings.writesPerSecond);
  }

  private runningVoters(cluster: string, state: ModelCluster): ModelMember[] {
    return [...state.members.values()].filter((m) => !m.isLearner && this.isRunning(cluster, m));
  }

  private hasQuorum(cluster: string, state: ModelCluster): boolean {
    const voters = [...state.members.values()].filter((m) => !m.isLearner).length;
    return this.runningVoters(cluster, state).length >= quorum(voters);
  }

  private refreshConnections(): void {
    for (const [cluster, state] of this.clusters) {
      for (const member of state.members.values()) if (!this.isRunning(cluster, member)) delete member.connectedSince;
      this.refreshLeader(cluster, state);
    }
  }

  private refreshLeader(cluster: string, state: ModelCluster): void {
    const leader = state.leaderId === undefined ? undefined : state.members.get(state.leaderId);
    if (leader && !leader.isLearner && this.isRunning(cluster, leader) && this.hasQuorum(cluster, state)) return;
    const wasLed = state.leaderId !== undefined;
    state.leaderId = undefined;
    if (!this.hasQuorum(cluster, state)) return;
    const next = this.runningVoters(cluster, state).sort((a, b) => (a.id < b.id ? -1 : 1))[0];
    if (!next) return;
    state.leaderId = next.id;
    if (wasLed || leader) state.electionUntil = this.clock.now() + this.timings.electionMs;
  }

  private currentLeader(cluster: string, state: ModelCluster): string | undefined {
    this.refreshLeader(cluster, state);
    return this.clock.now() >= state.electionUntil ? state.leaderId : undefined;
  }

  /** The cluster and member an endpoint reaches, or the error a client would get. */
  private endpoint(url: string): { cluster: string; state: ModelCluster; member: ModelMember } {
    const machine = [...this.machines.values()].find((m) => `http://${m.address}:2379` === url);
    if (!machine?.running) fail('Unreachable', `connect ECONNREFUSED ${url}`);
    const found = this.memberOfMachine(machine);
    const state = this.clusters.get(machine.cluster);
    if (!found || !state) fail('Unreachable', `connect ECONNREFUSED ${url}`);
    return { cluster: found.cluster, state, member: found.member };
  }

  private voterEndpoint(endpoints: readonly string[]): { cluster: string; state: ModelCluster; member: ModelMember } {
    let lastError: unknown = new EtcdAdminError('Unreachable', 'no endpoints given');
    for (const url of endpoints) {
      try {
        const reached = this.endpoint(url);
        if (reached.member.isLearner) fail('LearnerRpc', 'etcdserver: rpc not supported for learner');
        return reached;
      } catch (error) {
        lastError = error;
      }
    }
    throw lastError;
  }

  private requireQuorum(cluster: string, state: ModelCluster): void {
    if (!this.hasQuorum(cluster, state) || this.currentLeader(cluster, state) === undefined) fail('Timeout', 'context deadline exceeded');
  }

  private toMember(m: ModelMember, cluster: string): EtcdMember {
    const published = this.isRunning(cluster, m) && (!m.isLearner || this.clock.now() >= m.caughtUpAt);
    const everStarted = m.name !== '' && (published || !m.isLearner);
    return { id: m.id, name: everStarted ? m.name : '', peerURLs: [m.peerURL], clientURLs: everStarted && m.clientURL ? [m.clientURL] : [], isLearner: m.isLearner };
  }

  memberList(endpoints: readonly string[], linearizable = true): EtcdMember[] {
    const { cluster, state } = this.voterEndpoint(endpoints);
    if (linearizable) this.requireQuorum(cluster, state);
    return [...state.members.values()].map((m) => this.toMember(m, cluster));
  }

  /** The 5 s rule: the leader must have been connected to every voter for peerHealthGateMs. */
  private requireConnectedVoters(cluster: string, state: ModelCluster): void {
    const now = this.clock.now();
    for (const m of state.members.values()) {
      // The leader checks its connections to the other voters, not to itself.
      if (m.isLearner || m.id === state.leaderId) continue;
      if (m.connectedSince === undefined || now - m.connectedSince < this.timings.peerHealthGateMs) fail('UnhealthyCluster', 'etcdserver: unhealthy cluster');
    }
  }

  addLearner(endpoints: readonly string[], peerURL: string): { member: EtcdMember; members: EtcdMember[] } {
    const { cluster, state } = this.voterEndpoint(endpoints);
    this.requireQuorum(cluster, state);
    this.requireConnectedVoters(cluster, state);
    if ([...state.members.values()].some((m) => m.peerURL === peerURL)) fail('PeerURLExists', 'etcdserver: Peer URLs already exists');
    const learners = [...state.members.values()].filter((m) => m.isLearner).length;
    if (learners + 1 > state.maxLearners) fail('TooManyLearners', 'etcdserver: too many learner members in cluster');
    const member: ModelMember = { id: this.newMemberId(), name: '', peerURL, isLearner: true, caughtUpAt: Number.POSITIVE_INFINITY };
    state.members.set(member.id, member);
    state.baseIndex++;
    return { member: this.toMember(member, cluster), members: [...state.members.values()].map((m) => this.toMember(m, cluster)) };
  }

  promoteLearner(endpoints: readonly string[], memberId: string): void {
    const { cluster, state } = this.voterEndpoint(endpoints);
    this.requireQuorum(cluster, state);
    const member = state.members.get(memberId);
    if (!member) fail('MemberNotFound', 'etcdserver: member not found');
    const now = this.clock.now();
    const ready = member.isLearner ? this.isRunning(cluster, member) && now >= member.caughtUpAt && member.stalledAtIndex === undefined : true;
    if (!ready) fail('NotInSync', 'etcdserver: can only promote a learner member which is in sync with leader');
    if (!member.isLearner) fail('NotALearner', 'etcdserver: can only promote a learner member');
    const voters = [...state.members.values()].filter((m) => !m.isLearner).length + 1;
    const healthy = this.runningVoters(cluster, state).length + 1;
    if (healthy < quorum(voters)) this.violations.push({ at: now, rule: 'invariant-4', detail: `promote of ${memberId} leaves ${String(healthy)}/${String(voters)} healthy` });
    member.isLearner = false;
    state.baseIndex++;
  }

  removeMember(endpoints: readonly string[], memberId: string): void {
    const { cluster, state, member: via } = this.voterEndpoint(endpoints);
    this.requireQuorum(cluster, state);
    const member = state.members.get(memberId);
    if (!member) fail('MemberNotFound', 'etcdserver: member not found');
    if (!member.isLearner) this.requireConnectedVoters(cluster, state);
    const voters = [...state.members.values()].filter((m) => !m.isLearner);
    if (!member.isLearner) {
      const healthyAfter = this.runningVoters(cluster, state).filter((m) => m.id !== memberId).length;
      if (voters.length - 1 < 1) this.violations.push({ at: this.clock.now(), rule: 'invariant-6', detail: `removed the last voter ${memberId}` });
      else if (healthyAfter < quorum(voters.length - 1)) this.violations.push({ at: this.clock.now(), rule: 'invariant-4', detail: `removal of ${memberId} leaves ${String(healthyAfter)}/${String(voters.length - 1)} healthy` });
    }
    state.members.delete(memberId);
    state.baseIndex++;
    // A removed member's process exits by itself.
    const machine = this.machineOfMember(cluster, member);
    if (machine?.dataMemberId === memberId) machine.running = false;
    this.refreshLeader(cluster, state);
    if (via.id === memberId) fail('ServerStopped', 'etcdserver: server stopped');
  }

  moveLeader(leaderEndpoint: string, targetId: string): void {
    const { cluster, state, member } = this.endpoint(leaderEndpoint);
    if (member.isLearner) fail('LearnerRpc', 'etcdserver: rpc not supported for learner');
    if (this.currentLeader(cluster, state) !== member.id) fail('NotLeader', 'etcdserver: not leader');
    const target = state.members.get(targetId);
    if (!target || target.isLearner || !this.isRunning(cluster, target)) fail('BadLeaderTransferee', 'etcdserver: bad leader transferee');
    state.leaderId = targetId;
  }

  status(endpoint: string): EtcdMemberStatus {
    const { cluster, state, member } = this.endpoint(endpoint);
    const version = this.machineOfMember(cluster, member)?.version ?? '';
    const now = this.clock.now();
    // A catching-up learner's client port answers nothing until it has applied the backlog.
    if (member.isLearner && now < member.caughtUpAt && member.stalledAtIndex === undefined) fail('Timeout', 'context deadline exceeded');
    const index = this.raftIndex(cluster);
    const applied = member.stalledAtIndex ?? index;
    const leader = this.hasQuorum(cluster, state) ? this.currentLeader(cluster, state) : undefined;
    return {
      memberId: member.id,
      leaderId: leader ?? '0',
      raftIndex: member.isLearner ? applied : index,
      raftAppliedIndex: applied,
      raftTerm: 2,
      isLearner: member.isLearner,
      version,
      dbSize: 20480,
      errors: leader === undefined ? ['etcdserver: no leader'] : [],
    };
  }

  alarms(endpoints: readonly string[]): EtcdAlarm[] {
    const { state } = this.voterEndpoint(endpoints);
    return [...state.alarms];
  }

  /** Learners currently in a cluster (for invariant checks). */
  learnerCount(cluster: string): number {
    const state = this.clusters.get(cluster);
    return state ? [...state.members.values()].filter((m) => m.isLearner).length : 0;
  }

  voterCount(cluster: string): number {
    const state = this.clusters.get(cluster);
    return state ? [...state.members.values()].filter((m) => !m.isLearner).length : 0;
  }

  healthyVoterCount(cluster: string): number {
    const state = this.clusters.get(cluster);
    return state ? this.runningVoters(cluster, state).length : 0;
  }
}

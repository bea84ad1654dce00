import { InvalidInputError } from '../api/errors.ts';
import { quorum } from '../domain/quorum.ts';
import type { Clock } from '../ports/clock.ts';
import type { CreateMachineRequest, MachineInfra, MemberLaunch } from '../ports/machine-provider.ts';
import { drawDuration } from '../api/duration.ts';
import { MAX_ORDINAL, type ModelMachine, type ModelMember, type ModelCluster, type ModelViolation, peerURLOf, clientURLOf, parseInitialCluster } from './model-types.ts';
import { MEASURED_TIMINGS, type ModelTimings } from './model-timings.ts';

/** The model's machines and the state of each etcd cluster they run: what the rules and the faults act on. */
export abstract class ModelInfrastructure {
  readonly machines = new Map<string, ModelMachine>();
  /** Machines by URL (a cluster slot and an ordinal: reused only once the machine before is gone). */
  protected readonly byPeerURL = new Map<string, ModelMachine>();
  protected readonly byClientURL = new Map<string, ModelMachine>();
  readonly clusters = new Map<string, ModelCluster>();
  readonly violations: ModelViolation[] = [];
  /** Clusters bootstrapped (`--initial-cluster-state new` on an empty data dir). */
  initCount = 0;
  /** Membership changes (add, promote, remove, move leader) in flight now (invariant 3). */
  protected changesInFlight = 0;
  protected provisioningAlwaysFails = false;

  constructor(
    readonly clock: Clock,
    readonly random: () => number,
    readonly timings: ModelTimings = MEASURED_TIMINGS,
    private readonly slots = new Map<string, number>(),
  ) {}

  machineNamed(name: string): ModelMachine | undefined {
    return [...this.machines.values()].find((m) => m.name === name);
  }

  // ---- infrastructure -----------------------------------------------------------------------------

  protected slotOf(cluster: string): number {
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
    // The local provider's limit (one loopback /24 per cluster): a cluster that never reuses an
    // ordinal runs out of them here as it would there.
    if (!machine && (!Number.isInteger(request.ordinal) || request.ordinal < 1 || request.ordinal > MAX_ORDINAL)) {
      throw new InvalidInputError([`machine ordinal ${String(request.ordinal)} is out of range 1..${String(MAX_ORDINAL)} (model provider, as the local one)`]);
    }
    if (!machine) {
      const address = `10.${String(this.slotOf(request.cluster))}.0.${String(request.ordinal)}`;
      machine = {
        cluster: request.cluster,
        name: request.name,
        address,
        clientURL: `http://${address}:2379`,
        peerURL: `http://${address}:2380`,
        readyAt: this.clock.now() + drawDuration(this.timings.provisioning, this.random),
        failProvisioning: this.provisioningAlwaysFails,
        neverStarts: false,
        running: false,
        version: '',
      };
      this.machines.set(key, machine);
      this.byPeerURL.set(machine.peerURL, machine);
      this.byClientURL.set(machine.clientURL, machine);
    }
    return this.infraOf(machine);
  }

  protected stateOf(machine: ModelMachine): MachineInfra['state'] {
    if (machine.deleteAt !== undefined) return 'Deleting';
    if (this.clock.now() < machine.readyAt) return 'Provisioning';
    return machine.failProvisioning ? 'Failed' : 'Provisioned';
  }

  protected infraOf(machine: ModelMachine): MachineInfra {
    const state = this.stateOf(machine);
    const infra: MachineInfra = {
      name: machine.name,
      address: machine.address,
      clientURL: clientURLOf(machine),
      peerURL: peerURLOf(machine),
      state,
      memberRunning: machine.running,
    };
    if (state === 'Failed') infra.failureMessage = 'simulated provisioning failure';
    if (machine.startedAt !== undefined) infra.memberStartedAt = machine.startedAt;
    return infra;
  }

  protected isGone(machine: ModelMachine): boolean {
    return machine.deleteAt !== undefined && this.clock.now() >= machine.deleteAt;
  }

  protected live(machine: ModelMachine | undefined): ModelMachine | undefined {
    return machine && !this.isGone(machine) ? machine : undefined;
  }

  describeMachine(cluster: string, name: string): MachineInfra | undefined {
    const key = `${cluster}/${name}`;
    const machine = this.machines.get(key);
    if (!machine) return undefined;
    if (this.isGone(machine)) {
      this.machines.delete(key);
      if (this.byPeerURL.get(machine.peerURL) === machine) this.byPeerURL.delete(machine.peerURL);
      if (this.byClientURL.get(machine.clientURL) === machine) this.byClientURL.delete(machine.clientURL);
      return undefined;
    }
    return this.infraOf(machine);
  }

  deleteMachine(cluster: string, name: string): void {
    const machine = this.machines.get(`${cluster}/${name}`);
    if (!machine || machine.deleteAt !== undefined) return;
    const found = this.memberOfMachine(machine);
    if (found) this.violations.push({ at: this.clock.now(), rule: 'invariant-5', detail: `machine ${name} deleted while member ${found.member.id} exists` });
    machine.deleteAt = this.clock.now() + drawDuration(this.timings.deletion, this.random);
    this.halt(machine);
  }

  stopMember(cluster: string, name: string): void {
    const machine = this.machines.get(`${cluster}/${name}`);
    if (machine) this.halt(machine);
  }

  /** The member process stops (crash, stop, machine deletion or removal from the cluster). */
  protected halt(machine: ModelMachine): void {
    machine.running = false;
    const found = this.memberOfMachine(machine);
    // A member that stops before it published itself never appears with a name.
    if (found && found.member.publishedAt !== undefined && found.member.publishedAt > this.clock.now()) delete found.member.publishedAt;
    this.refreshConnections();
  }

  /** Whether the machine's data dir holds a member: a start then restarts that member. */
  hasMemberData(cluster: string, name: string): boolean {
    return this.machines.get(`${cluster}/${name}`)?.dataClusterId !== undefined;
  }

  startMember(cluster: string, name: string, launch: MemberLaunch): void {
    const machine = this.machines.get(`${cluster}/${name}`);
    if (!machine || this.stateOf(machine) !== 'Provisioned') throw new Error(`machine ${name} is not provisioned`);
    if (machine.running) return;
    const now = this.clock.now();
    machine.version = launch.version;
    machine.startedAt = now;
    if (machine.neverStarts) return;
    if (machine.dataClusterId !== undefined) {
      this.restart(machine, launch);
      return;
    }
    const entries = parseInitialCluster(launch.initialCluster);
    if (launch.initialClusterState === 'new') {
      const self = peerURLOf(machine);
      if (entries.length !== 1 || entries[0]?.url !== self) {
        throw new Error(`model: only single-member bootstrap is modelled, got --initial-cluster ${launch.initialCluster}`);
      }
      this.bootstrap(machine, launch);
      return;
    }
    this.join(machine, launch, entries);
  }

  /** A start on a data dir: the member comes back as itself, whatever the flags say. */
  protected restart(machine: ModelMachine, launch: MemberLaunch): void {
    const state = machine.dataClusterId === undefined ? undefined : this.clusters.get(machine.dataClusterId);
    const member = state && machine.dataMemberId !== undefined ? state.members.get(machine.dataMemberId) : undefined;
    // Removed from the cluster: etcd starts, learns it was removed and exits.
    if (!state || !member) return;
    member.unchecked = launch.strictReconfigCheck === false;
    member.maxLearners = launch.maxLearners;
    const now = this.clock.now();
    machine.running = true;
    member.connectedSince = now;
    // A learner stopped before it caught up starts over; one that never published does so once started.
    if (member.isLearner && member.caughtUpAt > now) member.caughtUpAt = now + drawDuration(this.timings.catchUp, this.random);
    member.publishedAt ??= now + this.timings.publishMs;
    this.refreshLeader(state);
  }

  protected bootstrap(machine: ModelMachine, launch: MemberLaunch): void {
    const now = this.clock.now();
    const existing = [...this.clusters.values()].filter((c) => c.owner === machine.cluster && c.members.size > 0);
    if (existing.length > 0) {
      this.violations.push({ at: now, rule: 'invariant-1', detail: `machine ${machine.name} bootstrapped a new cluster while cluster ${existing.map((c) => c.id).join(',')} has members` });
    }
    this.initCount++;
    const id = this.newMemberId();
    const member: ModelMember = {
      id,
      name: launch.memberName,
      peerURL: peerURLOf(machine),
      clientURL: clientURLOf(machine),
      isLearner: false,
      connectedSince: now,
      caughtUpAt: now,
      publishedAt: now + this.timings.electionMs,
      unchecked: launch.strictReconfigCheck === false,
      maxLearners: launch.maxLearners,
    };
    const clusterId = this.newMemberId();
    this.clusters.set(clusterId, {
      id: clusterId,
      owner: machine.cluster,
      token: launch.clusterToken,
      members: new Map([[id, member]]),
      leaderId: id,
      electionUntil: now + this.timings.electionMs,
      leaderSince: now,
      baseIndex: 4,
      createdAt: now,
      alarms: [],
      removedPeerURLs: new Map(),
    });
    machine.running = true;
    machine.dataClusterId = clusterId;
    machine.dataMemberId = id;
  }

  /**
   * `--initial-cluster-state existing`: etcd fetches the membership from the listed peers and exits
   * unless its own peer URL was added and the listed peer URLs match the members exactly ("member
   * count is unequal"). Fetching the list needs a running peer, not quorum.
   */
  protected join(machine: ModelMachine, launch: MemberLaunch, entries: { name: string; url: string }[]): void {
    const self = peerURLOf(machine);
    const state = this.clusterReachableVia(entries.map((e) => e.url).filter((url) => url !== self));
    if (!state) return; // etcd exits: cannot fetch the cluster from any listed peer
    const member = [...state.members.values()].find((m) => m.peerURL === self);
    if (!member) return; // etcd exits: this peer URL was never added
    const listed = new Set(entries.map((e) => e.url));
    const actual = new Set([...state.members.values()].map((m) => m.peerURL));
    if (listed.size !== actual.size || [...actual].some((url) => !listed.has(url))) return; // "member count is unequal"
    const now = this.clock.now();
    machine.running = true;
    machine.dataClusterId = state.id;
    machine.dataMemberId = member.id;
    member.name = launch.memberName;
    member.clientURL = clientURLOf(machine);
    member.unchecked = launch.strictReconfigCheck === false;
    member.maxLearners = launch.maxLearners;
    member.connectedSince = now;
    member.caughtUpAt = now + drawDuration(this.timings.catchUp, this.random);
    member.publishedAt = now + this.timings.publishMs;
    this.refreshLeader(state);
  }

  /** The cluster a running member at one of these peer URLs belongs to. */
  protected clusterReachableVia(peerURLs: readonly string[]): ModelCluster | undefined {
    for (const url of peerURLs) {
      const machine = this.live(this.byPeerURL.get(url));
      if (!machine?.running) continue;
      const state = machine.dataClusterId === undefined ? undefined : this.clusters.get(machine.dataClusterId);
      if (state && machine.dataMemberId !== undefined && state.members.has(machine.dataMemberId)) return state;
    }
    return undefined;
  }

  protected newMemberId(): string {
    const high = BigInt(Math.floor(this.random() * 2 ** 32));
    const low = BigInt(Math.floor(this.random() * 2 ** 32));
    return ((high << 32n) | low | 1n).toString();
  }

  // ---- etcd ---------------------------------------------------------------------------------------

  /** The newest cluster bootstrapped by this provider cluster's machines. */
  protected currentCluster(owner: string): ModelCluster | undefined {
    let latest: ModelCluster | undefined;
    for (const state of this.clusters.values()) if (state.owner === owner && (!latest || state.createdAt >= latest.createdAt)) latest = state;
    return latest;
  }

  protected memberOfMachine(machine: ModelMachine): { state: ModelCluster; member: ModelMember } | undefined {
    const url = peerURLOf(machine);
    for (const state of this.clusters.values()) {
      if (state.owner !== machine.cluster) continue;
      const member = [...state.members.values()].find((m) => m.peerURL === url);
      if (member) return { state, member };
    }
    return undefined;
  }

  protected machineOfMember(state: ModelCluster, member: ModelMember): ModelMachine | undefined {
    const machine = this.live(this.byPeerURL.get(member.peerURL));
    return machine?.cluster === state.owner ? machine : undefined;
  }

  protected isRunning(state: ModelCluster, member: ModelMember): boolean {
    const machine = this.machineOfMember(state, member);
    return machine?.running === true && machine.dataClusterId === state.id && machine.dataMemberId === member.id;
  }

  protected raftIndex(state: ModelCluster): number {
    return state.baseIndex + Math.floor(((this.clock.now() - state.createdAt) / 1000) * this.timings.writesPerSecond);
  }

  protected voters(state: ModelCluster): ModelMember[] {
    return [...state.members.values()].filter((m) => !m.isLearner);
  }

  protected runningVoters(state: ModelCluster): ModelMember[] {
    return this.voters(state).filter((m) => this.isRunning(state, m));
  }

  protected hasQuorum(state: ModelCluster): boolean {
    return this.runningVoters(state).length >= quorum(this.voters(state).length);
  }

  protected refreshConnections(): void {
    for (const state of this.clusters.values()) {
      for (const member of state.members.values()) if (!this.isRunning(state, member)) delete member.connectedSince;
      this.refreshLeader(state);
    }
  }

  protected refreshLeader(state: ModelCluster): void {
    const leader = state.leaderId === undefined ? undefined : state.members.get(state.leaderId);
    if (leader && !leader.isLearner && this.isRunning(state, leader) && this.hasQuorum(state)) return;
    const wasLed = state.leaderId !== undefined;
    state.leaderId = undefined;
    if (wasLed) state.leaderLostAt = this.clock.now();
    if (!this.hasQuorum(state)) return;
    const next = this.runningVoters(state).sort((a, b) => (a.id < b.id ? -1 : 1))[0];
    if (!next) return;
    state.leaderId = next.id;
    state.leaderSince = this.clock.now();
    if (wasLed || leader) state.electionUntil = this.clock.now() + this.timings.electionMs;
  }

  protected currentLeader(state: ModelCluster): string | undefined {
    this.refreshLeader(state);
    return this.clock.now() >= state.electionUntil ? state.leaderId : undefined;
  }

  /** The cluster and member an endpoint reaches, or the error a client would get. */
}

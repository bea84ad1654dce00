import type { DurationRange } from '../api/duration.ts';
import { InvalidInputError } from '../api/errors.ts';
import { quorum } from '../domain/quorum.ts';
import type { Clock } from '../ports/clock.ts';
import { EtcdAdminError, type EtcdAlarm, type EtcdErrorKind, type EtcdMember, type EtcdMemberStatus } from '../ports/etcd-admin.ts';
import type { CreateMachineRequest, MachineInfra, MemberLaunch } from '../ports/machine-provider.ts';
import { drawDuration } from './random.ts';

/** Machine ordinals per cluster, as on the local provider (`prefix.slot.ordinal`). */
export const MAX_ORDINAL = 254;

/**
 * Timings measured as docs/etcd-behaviour.md describes (etcd 3.4.23 / 3.5.16, loopback, empty database) unless the caller
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
  /**
   * Round trip of one etcd or provider call (not measured; 0 keeps timelines exact). With a latency,
   * a change lands halfway through its call, so calls can overlap and observations can go stale.
   */
  callLatency: DurationRange;
}

export const MEASURED_TIMINGS: ModelTimings = {
  provisioning: { minMs: 0, maxMs: 0 },
  deletion: { minMs: 0, maxMs: 0 },
  catchUp: { minMs: 200, maxMs: 450 },
  peerHealthGateMs: 5000,
  electionMs: 1400,
  writesPerSecond: 20,
  callLatency: { minMs: 0, maxMs: 0 },
};

interface ModelMachine {
  /** The provider cluster (fastplane's cluster name) the machine belongs to. */
  cluster: string;
  name: string;
  address: string;
  clientURL: string;
  peerURL: string;
  readyAt: number;
  failProvisioning: boolean;
  neverStarts: boolean;
  running: boolean;
  version: string;
  startedAt?: number;
  deleteAt?: number;
  /** The etcd cluster and member whose data this machine's disk holds (set once its member ran). */
  dataClusterId?: string;
  dataMemberId?: string;
}

interface ModelMember {
  id: string;
  /** The --name the member started with; published (visible in member lists) from publishedAt on. */
  name: string;
  peerURL: string;
  clientURL?: string;
  isLearner: boolean;
  /** When the leader's connection to it started (for the 5 s rule); undefined while not running. */
  connectedSince?: number;
  caughtUpAt: number;
  publishedAt?: number;
  stalledAtIndex?: number;
  /** A follower that has not heard of the new leader yet: its status names `leaderId` until `until`. */
  staleLeader?: { leaderId: string; until: number };
  /** Started with --strict-reconfig-check=false: as the serving member it skips the add/remove health checks. */
  unchecked?: boolean;
  /** Its own --max-learners, from its start on: each member checks a learner add against its own. */
  maxLearners?: number;
}

/**
 * One etcd cluster. Real etcd identifies a cluster by its bootstrap (token and initial members), not
 * by the infrastructure it runs on: every `--initial-cluster-state new` start on an empty data dir
 * creates a new one, and a member started with `existing` joins the cluster its listed peers belong to.
 */
interface ModelCluster {
  id: string;
  /** The provider cluster whose machine bootstrapped it. */
  owner: string;
  token: string;
  members: Map<string, ModelMember>;
  leaderId: string | undefined;
  /** No leader until this time (election in progress). */
  electionUntil: number;
  /** When leaderId took over (it leads from max(leaderSince, electionUntil) on). */
  leaderSince: number;
  /** When the last leader stopped leading (undefined: never led, or led since its bootstrap). */
  leaderLostAt?: number;
  baseIndex: number;
  createdAt: number;
  alarms: EtcdAlarm[];
  /** Peer URL -> when its member was removed (a re-add in the same second re-creates the removed ID). */
  removedPeerURLs: Map<string, number>;
}

/** Unsafe changes the model saw applied: the oracle for invariants 1, 3, 4, 5 and 6. */
export interface ModelViolation {
  at: number;
  rule: string;
  detail: string;
}

/** The truth about one fastplane cluster, for invariant and convergence checks. */
export interface ModelClusterSnapshot {
  clusterId?: string;
  leaderId?: string;
  members: { id: string; peerURL: string; isLearner: boolean; running: boolean; stalled: boolean; machine?: string }[];
  /** Machines not deleted yet (including ones being deleted). */
  machines: { name: string; state: MachineInfra['state']; running: boolean; started: boolean; version: string; memberId?: string }[];
}

/**
 * etcd's refusal, as a client would receive it. Refusals are the model's bread and butter (every poll
 * during the 5 s rule or a catch-up gets one) and come from a remote server, so no stack is captured:
 * it would cost more than the rest of the call and show nothing.
 */
function fail(kind: EtcdErrorKind, message: string): never {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  const error = new EtcdAdminError(kind, message);
  Error.stackTraceLimit = limit;
  throw error;
}

const peerURLOf = (machine: ModelMachine): string => machine.peerURL;
const clientURLOf = (machine: ModelMachine): string => machine.clientURL;

/** `--initial-cluster` entries (`name=url,...`). */
function parseInitialCluster(text: string): { name: string; url: string }[] {
  return text
    .split(',')
    .filter((entry) => entry !== '')
    .map((entry) => {
      const eq = entry.indexOf('=');
      return { name: entry.slice(0, eq), url: entry.slice(eq + 1) };
    });
}

/**
 * An executable model of etcd membership and of machines, on the caller's clock, encoding the rules
 * measured on real etcd (docs/etcd-behaviour.md) and etcd's strict reconfiguration checks: one learner (or
 * --max-learners), promote refused until caught up, the 5 s connection rule for adds and for removing
 * a connected voter, quorum loss when running voters < quorum, unstarted members, removed members
 * exit, uint64 member IDs as decimal strings. Like etcd, it guards itself; the `violations` list
 * records changes that were applied although unsafe.
 */
export class ModelWorld {
  readonly machines = new Map<string, ModelMachine>();
  /** Machines by URL (a cluster slot and an ordinal: reused only once the machine before is gone). */
  private readonly byPeerURL = new Map<string, ModelMachine>();
  private readonly byClientURL = new Map<string, ModelMachine>();
  readonly clusters = new Map<string, ModelCluster>();
  readonly violations: ModelViolation[] = [];
  /** Clusters bootstrapped (`--initial-cluster-state new` on an empty data dir). */
  initCount = 0;
  /** Membership changes (add, promote, remove, move leader) in flight now (invariant 3). */
  private changesInFlight = 0;
  private provisioningAlwaysFails = false;

  constructor(
    readonly clock: Clock,
    readonly random: () => number,
    readonly timings: ModelTimings = MEASURED_TIMINGS,
    private readonly slots = new Map<string, number>(),
  ) {}

  /**
   * The next time the model changes by itself (a machine finishes provisioning or deletion, a learner
   * catches up or publishes, the 5 s peer-connection rule lapses, an election ends). Between two such
   * times every observation is identical, so a poll in between can only repeat the previous decision.
   */
  nextChangeAfter(now: number): number | undefined {
    let next = Number.POSITIVE_INFINITY;
    const consider = (at: number | undefined): void => {
      if (at !== undefined && at > now && at < next) next = at;
    };
    for (const machine of this.machines.values()) {
      consider(machine.readyAt);
      consider(machine.deleteAt);
    }
    for (const cluster of this.clusters.values()) {
      consider(cluster.electionUntil);
      for (const member of cluster.members.values()) {
        consider(member.caughtUpAt);
        consider(member.publishedAt);
        consider(member.staleLeader?.until);
        if (member.connectedSince !== undefined) consider(member.connectedSince + this.timings.peerHealthGateMs);
      }
      for (const removedAt of cluster.removedPeerURLs.values()) consider(removedAt + 1000);
    }
    return Number.isFinite(next) ? next : undefined;
  }

  // ---- faults -------------------------------------------------------------------------------------

  /** The member process crashes; its data stays, so a later start restarts the same member. */
  killMember(name: string): void {
    const machine = this.machineNamed(name);
    if (machine) this.halt(machine);
  }

  /** Every machine created from now on ends in Failed (a provider that always fails). */
  failEveryProvisioning(): void {
    this.provisioningAlwaysFails = true;
  }

  /** The machine ends in Failed instead of Provisioned (no effect once provisioned). */
  failProvisioning(name: string): void {
    const machine = this.machineNamed(name);
    if (machine) machine.failProvisioning = true;
  }

  /** Every later start of this machine's member does nothing (the process exits at once). */
  neverStart(name: string): void {
    const machine = this.machineNamed(name);
    if (machine) machine.neverStarts = true;
  }

  /** A learner stops applying (slow disk, lossy link): it answers, but its applied index stays. */
  stallLearner(name: string): void {
    const machine = this.machineNamed(name);
    const found = machine ? this.memberOfMachine(machine) : undefined;
    if (found?.member.isLearner) found.member.stalledAtIndex = Math.max(0, this.raftIndex(found.state) - 1);
  }

  /**
   * Leadership passes to `to`'s member (an election after a network hiccup), and `laggard`'s member
   * keeps naming the old leader for `forMs`: a follower that has not heard of the new term yet. The
   * controller then sees voters disagree about the leader while the model knows the truth.
   */
  transferLeadership(to: string, laggard: string, forMs: number): void {
    const target = this.machineNamed(to);
    const found = target ? this.memberOfMachine(target) : undefined;
    if (!found || found.member.isLearner || !this.isRunning(found.state, found.member)) return;
    const { state, member } = found;
    const old = this.currentLeader(state);
    if (old === undefined || old === member.id) return;
    state.leaderId = member.id;
    state.leaderSince = this.clock.now();
    const behind = this.machineNamed(laggard);
    const lagging = behind ? this.memberOfMachine(behind) : undefined;
    if (lagging?.state === state && lagging.member.id !== member.id) lagging.member.staleLeader = { leaderId: old, until: this.clock.now() + forMs };
  }

  raiseAlarm(owner: string, alarm: EtcdAlarm): void {
    this.currentCluster(owner)?.alarms.push(alarm);
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

  private stateOf(machine: ModelMachine): MachineInfra['state'] {
    if (machine.deleteAt !== undefined) return 'Deleting';
    if (this.clock.now() < machine.readyAt) return 'Provisioning';
    return machine.failProvisioning ? 'Failed' : 'Provisioned';
  }

  private infraOf(machine: ModelMachine): MachineInfra {
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

  private isGone(machine: ModelMachine): boolean {
    return machine.deleteAt !== undefined && this.clock.now() >= machine.deleteAt;
  }

  private live(machine: ModelMachine | undefined): ModelMachine | undefined {
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
  private halt(machine: ModelMachine): void {
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
  private restart(machine: ModelMachine, launch: MemberLaunch): void {
    const state = machine.dataClusterId === undefined ? undefined : this.clusters.get(machine.dataClusterId);
    const member = state && machine.dataMemberId !== undefined ? state.members.get(machine.dataMemberId) : undefined;
    // Removed from the cluster: etcd starts, learns it was removed and exits.
    if (!state || !member) return;
    member.unchecked = launch.strictReconfigCheck === false;
    member.maxLearners = launch.maxLearners;
    const now = this.clock.now();
    machine.running = true;
    member.connectedSince = now;
    // A learner stopped before it caught up starts over; one that never published publishes once it has.
    if (member.isLearner && member.caughtUpAt > now) member.caughtUpAt = now + drawDuration(this.timings.catchUp, this.random);
    member.publishedAt ??= Math.max(now, member.caughtUpAt);
    this.refreshLeader(state);
  }

  private bootstrap(machine: ModelMachine, launch: MemberLaunch): void {
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
  private join(machine: ModelMachine, launch: MemberLaunch, entries: { name: string; url: string }[]): void {
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
    member.publishedAt = member.caughtUpAt;
    this.refreshLeader(state);
  }

  /** The cluster a running member at one of these peer URLs belongs to. */
  private clusterReachableVia(peerURLs: readonly string[]): ModelCluster | undefined {
    for (const url of peerURLs) {
      const machine = this.live(this.byPeerURL.get(url));
      if (!machine?.running) continue;
      const state = machine.dataClusterId === undefined ? undefined : this.clusters.get(machine.dataClusterId);
      if (state && machine.dataMemberId !== undefined && state.members.has(machine.dataMemberId)) return state;
    }
    return undefined;
  }

  private newMemberId(): string {
    const high = BigInt(Math.floor(this.random() * 2 ** 32));
    const low = BigInt(Math.floor(this.random() * 2 ** 32));
    return ((high << 32n) | low | 1n).toString();
  }

  // ---- etcd ---------------------------------------------------------------------------------------

  /** The newest cluster bootstrapped by this provider cluster's machines. */
  private currentCluster(owner: string): ModelCluster | undefined {
    let latest: ModelCluster | undefined;
    for (const state of this.clusters.values()) if (state.owner === owner && (!latest || state.createdAt >= latest.createdAt)) latest = state;
    return latest;
  }

  private memberOfMachine(machine: ModelMachine): { state: ModelCluster; member: ModelMember } | undefined {
    const url = peerURLOf(machine);
    for (const state of this.clusters.values()) {
      if (state.owner !== machine.cluster) continue;
      const member = [...state.members.values()].find((m) => m.peerURL === url);
      if (member) return { state, member };
    }
    return undefined;
  }

  private machineOfMember(state: ModelCluster, member: ModelMember): ModelMachine | undefined {
    const machine = this.live(this.byPeerURL.get(member.peerURL));
    return machine?.cluster === state.owner ? machine : undefined;
  }

  private isRunning(state: ModelCluster, member: ModelMember): boolean {
    const machine = this.machineOfMember(state, member);
    return machine?.running === true && machine.dataClusterId === state.id && machine.dataMemberId === member.id;
  }

  private raftIndex(state: ModelCluster): number {
    return state.baseIndex + Math.floor(((this.clock.now() - state.createdAt) / 1000) * this.timings.writesPerSecond);
  }

  private voters(state: ModelCluster): ModelMember[] {
    return [...state.members.values()].filter((m) => !m.isLearner);
  }

  private runningVoters(state: ModelCluster): ModelMember[] {
    return this.voters(state).filter((m) => this.isRunning(state, m));
  }

  private hasQuorum(state: ModelCluster): boolean {
    return this.runningVoters(state).length >= quorum(this.voters(state).length);
  }

  private refreshConnections(): void {
    for (const state of this.clusters.values()) {
      for (const member of state.members.values()) if (!this.isRunning(state, member)) delete member.connectedSince;
      this.refreshLeader(state);
    }
  }

  private refreshLeader(state: ModelCluster): void {
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

  private currentLeader(state: ModelCluster): string | undefined {
    this.refreshLeader(state);
    return this.clock.now() >= state.electionUntil ? state.leaderId : undefined;
  }

  /** The cluster and member an endpoint reaches, or the error a client would get. */
  private endpoint(url: string): { state: ModelCluster; member: ModelMember } {
    const machine = this.live(this.byClientURL.get(url));
    if (!machine?.running) fail('Unreachable', `connect ECONNREFUSED ${url}`);
    const state = machine.dataClusterId === undefined ? undefined : this.clusters.get(machine.dataClusterId);
    const member = state && machine.dataMemberId !== undefined ? state.members.get(machine.dataMemberId) : undefined;
    if (!state || !member) fail('Unreachable', `connect ECONNREFUSED ${url}`);
    return { state, member };
  }

  /** The first endpoint that answers; learners refuse every cluster and maintenance call but status. */
  private voterEndpoint(endpoints: readonly string[]): { state: ModelCluster; member: ModelMember } {
    let lastError: Error | undefined;
    for (const url of endpoints) {
      try {
        const reached = this.endpoint(url);
        if (reached.member.isLearner) fail('LearnerRpc', 'etcdserver: rpc not supported for learner');
        return reached;
      } catch (error) {
        lastError = error instanceof Error ? error : new Error(String(error));
      }
    }
    if (lastError === undefined) fail('Unreachable', 'no endpoints given');
    throw lastError;
  }

  private requireQuorum(state: ModelCluster): void {
    if (!this.hasQuorum(state) || this.currentLeader(state) === undefined) fail('Timeout', 'context deadline exceeded');
  }

  private isPublished(member: ModelMember): boolean {
    return member.publishedAt !== undefined && this.clock.now() >= member.publishedAt;
  }

  private toMember(m: ModelMember): EtcdMember {
    const published = this.isPublished(m);
    return { id: m.id, name: published ? m.name : '', peerURLs: [m.peerURL], clientURLs: published && m.clientURL ? [m.clientURL] : [], isLearner: m.isLearner };
  }

  memberList(endpoints: readonly string[], linearizable = true): EtcdMember[] {
    const { state } = this.voterEndpoint(endpoints);
    if (linearizable) this.requireQuorum(state);
    return [...state.members.values()].map((m) => this.toMember(m));
  }

  private connectedFor(member: ModelMember, ms: number): boolean {
    return member.connectedSince !== undefined && this.clock.now() - member.connectedSince >= ms;
  }

  /** etcd's mayAddMember: connected to every voter for the health interval (5 s), else "unhealthy cluster". */
  private requireConnectedVoters(state: ModelCluster, self: ModelMember): void {
    if (self.unchecked === true) return;
    for (const m of this.voters(state)) {
      if (m.id === self.id || m.id === state.leaderId) continue;
      if (!this.connectedFor(m, this.timings.peerHealthGateMs)) fail('UnhealthyCluster', 'etcdserver: unhealthy cluster');
    }
  }

  /** Brackets a membership change, so overlapping changes show up as a violation of invariant 3. */
  beginChange(what: string): void {
    this.changesInFlight++;
    if (this.changesInFlight > 1) {
      this.violations.push({ at: this.clock.now(), rule: 'invariant-3', detail: `${what} started while ${String(this.changesInFlight - 1)} other membership change(s) were in flight` });
    }
  }

  endChange(): void {
    this.changesInFlight = Math.max(0, this.changesInFlight - 1);
  }

  addLearner(endpoints: readonly string[], peerURL: string): { member: EtcdMember; members: EtcdMember[] } {
    const { state, member: via } = this.voterEndpoint(endpoints);
    this.requireConnectedVoters(state, via);
    this.requireQuorum(state);
    const removedAt = state.removedPeerURLs.get(peerURL);
    // The new ID derives from peer URLs and the Unix second: within the removal's second it is the removed ID.
    if (removedAt !== undefined && Math.floor(removedAt / 1000) === Math.floor(this.clock.now() / 1000)) fail('MemberNotFound', 'etcdserver: member not found');
    if ([...state.members.values()].some((m) => m.peerURL === peerURL)) fail('PeerURLExists', 'etcdserver: Peer URLs already exists');
    const learners = [...state.members.values()].filter((m) => m.isLearner).length;
    // Every running member applies the change against its own limit; the lowest one refuses first.
    const limit = Math.min(...[...state.members.values()].flatMap((m) => (m.maxLearners === undefined ? [] : [m.maxLearners])));
    if (learners + 1 > limit) fail('TooManyLearners', 'etcdserver: too many learner members in cluster');
    const member: ModelMember = { id: this.newMemberId(), name: '', peerURL, isLearner: true, caughtUpAt: Number.POSITIVE_INFINITY };
    state.members.set(member.id, member);
    state.baseIndex++;
    return { member: this.toMember(member), members: [...state.members.values()].map((m) => this.toMember(m)) };
  }

  promoteLearner(endpoints: readonly string[], memberId: string): void {
    const { state } = this.voterEndpoint(endpoints);
    this.requireQuorum(state);
    const member = state.members.get(memberId);
    if (!member) fail('MemberNotFound', 'etcdserver: member not found');
    const now = this.clock.now();
    // isLearnerReady (the leader compares the learner's Match with its own); a voter passes it.
    const ready = member.isLearner ? this.isRunning(state, member) && now >= member.caughtUpAt && member.stalledAtIndex === undefined : true;
    if (!ready) fail('NotInSync', 'etcdserver: can only promote a learner member which is in sync with leader');
    // IsReadyToPromoteMember: started voters, counting the learner, must make a quorum of the new set.
    const voters = this.voters(state);
    if (voters.filter((m) => m.publishedAt !== undefined).length + 1 < quorum(voters.length + 1)) {
      fail('NotEnoughStartedMembers', 'etcdserver: re-configuration failed due to not enough started members');
    }
    if (!member.isLearner) fail('NotALearner', 'etcdserver: can only promote a learner member');
    const healthy = this.runningVoters(state).length + 1;
    if (healthy < quorum(voters.length + 1)) this.violations.push({ at: now, rule: 'invariant-4', detail: `promote of ${memberId} leaves ${String(healthy)}/${String(voters.length + 1)} healthy` });
    member.isLearner = false;
    state.baseIndex++;
  }

  /**
   * etcd's mayRemoveMember: a learner goes at once; a voter only if the remaining started voters make a
   * quorum, and, unless it is down, if the members connected for 5 s minus it still make a quorum of
   * the smaller cluster. Then the removal is a raft proposal and needs quorum.
   */
  removeMember(endpoints: readonly string[], memberId: string): void {
    const { state, member: via } = this.voterEndpoint(endpoints);
    const member = state.members.get(memberId);
    if (member && !member.isLearner) this.checkLeaderBeforeRemoval(state, member);
    // etcd's mayRemoveMember returns at once when --strict-reconfig-check is off.
    if (member && !member.isLearner && via.unchecked !== true) {
      const rest = this.voters(state).filter((m) => m.id !== memberId);
      if (rest.filter((m) => m.publishedAt !== undefined).length < quorum(rest.length)) {
        fail('NotEnoughStartedMembers', 'etcdserver: re-configuration failed due to not enough started members');
      }
      const down = member.connectedSince === undefined && member.id !== via.id;
      if (!down) {
        const active = this.voters(state).filter((m) => m.id === via.id || this.connectedFor(m, this.timings.peerHealthGateMs)).length;
        if (active - 1 < quorum(rest.length)) fail('UnhealthyCluster', 'etcdserver: unhealthy cluster');
      }
    }
    this.requireQuorum(state);
    if (!member) fail('MemberNotFound', 'etcdserver: member not found');
    const now = this.clock.now();
    if (!member.isLearner) {
      const voters = this.voters(state);
      const healthyAfter = this.runningVoters(state).filter((m) => m.id !== memberId).length;
      if (voters.length - 1 < 1) this.violations.push({ at: now, rule: 'invariant-6', detail: `removed the last voter ${memberId}` });
      else if (healthyAfter < quorum(voters.length - 1)) this.violations.push({ at: now, rule: 'invariant-4', detail: `removal of ${memberId} leaves ${String(healthyAfter)}/${String(voters.length - 1)} healthy` });
    }
    state.members.delete(memberId);
    state.removedPeerURLs.set(member.peerURL, now);
    state.baseIndex++;
    // A removed member's process exits by itself.
    const machine = this.machineOfMember(state, member);
    if (machine?.dataMemberId === memberId) this.halt(machine);
    this.refreshLeader(state);
    if (via.id === memberId) fail('ServerStopped', 'etcdserver: server stopped');
  }

  /**
   * Invariant 5 against the truth: a voter removal is requested neither for the leader nor while the
   * cluster has no leader. Only what the controller could have seen counts: a leader that took over,
   * or a leader lost, within the last few call latencies may postdate the controller's observation
   * (a status read, the alarm read, the removal call itself).
   */
  private checkLeaderBeforeRemoval(state: ModelCluster, member: ModelMember): void {
    const now = this.clock.now();
    const stale = 3 * this.timings.callLatency.maxMs;
    const leader = this.currentLeader(state);
    if (leader === undefined) {
      const since = state.leaderLostAt ?? state.createdAt;
      if (now - since > stale) this.violations.push({ at: now, rule: 'invariant-5', detail: `removal of voter ${member.id} requested while the cluster has had no leader for ${String(now - since)} ms` });
      return;
    }
    const leading = now - Math.max(state.leaderSince, state.electionUntil);
    if (leader === member.id && leading > stale) {
      this.violations.push({ at: now, rule: 'invariant-5', detail: `removal of the leader ${member.id} (leading for ${String(leading)} ms) requested without moving leadership first` });
    }
  }

  moveLeader(leaderEndpoint: string, targetId: string): void {
    const { state, member } = this.endpoint(leaderEndpoint);
    if (member.isLearner) fail('LearnerRpc', 'etcdserver: rpc not supported for learner');
    if (this.currentLeader(state) !== member.id) fail('NotLeader', 'etcdserver: not leader');
    const target = state.members.get(targetId);
    if (!target || target.isLearner) fail('BadLeaderTransferee', 'etcdserver: bad leader transferee');
    // Raft cannot hand leadership to a member that does not answer; etcd gives up after a timeout.
    if (!this.isRunning(state, target)) fail('Timeout', 'etcdserver: request timed out, leader transfer took too long');
    state.leaderId = targetId;
    state.leaderSince = this.clock.now();
  }

  status(endpoint: string): EtcdMemberStatus {
    const { state, member } = this.endpoint(endpoint);
    const version = this.machineOfMember(state, member)?.version ?? '';
    const now = this.clock.now();
    // A catching-up learner's client port answers nothing until it has applied the backlog.
    if (member.isLearner && now < member.caughtUpAt && member.stalledAtIndex === undefined) fail('Timeout', 'context deadline exceeded');
    const index = this.raftIndex(state);
    const applied = member.stalledAtIndex ?? index;
    const stale = member.staleLeader !== undefined && now < member.staleLeader.until ? member.staleLeader.leaderId : undefined;
    const leader = stale ?? (this.hasQuorum(state) ? this.currentLeader(state) : undefined);
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

  /** Alarm GET is a raft request in etcd: it needs quorum like any write. */
  alarms(endpoints: readonly string[]): EtcdAlarm[] {
    const { state } = this.voterEndpoint(endpoints);
    this.requireQuorum(state);
    return [...state.alarms];
  }

  // ---- truth for invariant checks ------------------------------------------------------------------

  /** Learners in the provider cluster's current etcd cluster. */
  learnerCount(owner: string): number {
    const state = this.currentCluster(owner);
    return state ? [...state.members.values()].filter((m) => m.isLearner).length : 0;
  }

  /** The lowest --max-learners any member of the cluster was started with (what etcd enforces); unbounded before any started. */
  learnerLimit(owner: string): number {
    const state = this.currentCluster(owner);
    const limits = state ? [...state.members.values()].flatMap((m) => (m.maxLearners === undefined ? [] : [m.maxLearners])) : [];
    return Math.min(Number.POSITIVE_INFINITY, ...limits);
  }

  voterCount(owner: string): number {
    const state = this.currentCluster(owner);
    return state ? this.voters(state).length : 0;
  }

  /** Voters whose process runs (a running voter counts toward quorum). */
  healthyVoterCount(owner: string): number {
    const state = this.currentCluster(owner);
    return state ? this.runningVoters(state).length : 0;
  }

  /** Members and machines of a provider cluster as they really are. */
  snapshot(owner: string): ModelClusterSnapshot {
    const state = this.currentCluster(owner);
    const snapshot: ModelClusterSnapshot = { members: [], machines: [] };
    if (state) {
      snapshot.clusterId = state.id;
      const leader = this.currentLeader(state);
      if (leader !== undefined) snapshot.leaderId = leader;
      for (const member of state.members.values()) {
        const machine = this.machineOfMember(state, member);
        snapshot.members.push({
          id: member.id,
          peerURL: member.peerURL,
          isLearner: member.isLearner,
          running: this.isRunning(state, member),
          stalled: member.stalledAtIndex !== undefined,
          ...(machine ? { machine: machine.name } : {}),
        });
      }
    }
    for (const machine of this.machines.values()) {
      if (machine.cluster !== owner || this.isGone(machine)) continue;
      const found = this.memberOfMachine(machine);
      snapshot.machines.push({
        name: machine.name,
        state: this.stateOf(machine),
        running: machine.running,
        started: machine.startedAt !== undefined,
        version: machine.version,
        ...(found ? { memberId: found.member.id } : {}),
      });
    }
    snapshot.machines.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return snapshot;
  }
}

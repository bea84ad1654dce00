import { quorum } from '../domain/quorum.ts';
import { type EtcdAlarm, type EtcdMember, type EtcdMemberStatus } from '../ports/etcd-admin.ts';
import { ModelInfrastructure } from './model-infrastructure.ts';
import { type ModelMember, type ModelCluster, fail } from './model-types.ts';

/** etcd's membership API as the model answers it, with etcd's checks and refusals. */
export abstract class ModelClusterRules extends ModelInfrastructure {
  protected endpoint(url: string): { state: ModelCluster; member: ModelMember } {
    const machine = this.live(this.byClientURL.get(url));
    if (!machine?.running) fail('Unreachable', `connect ECONNREFUSED ${url}`);
    const state = machine.dataClusterId === undefined ? undefined : this.clusters.get(machine.dataClusterId);
    const member = state && machine.dataMemberId !== undefined ? state.members.get(machine.dataMemberId) : undefined;
    if (!state || !member) fail('Unreachable', `connect ECONNREFUSED ${url}`);
    return { state, member };
  }

  /** The first endpoint that answers; learners refuse every cluster and maintenance call but status. */
  protected voterEndpoint(endpoints: readonly string[]): { state: ModelCluster; member: ModelMember } {
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

  protected requireQuorum(state: ModelCluster): void {
    if (!this.hasQuorum(state) || this.currentLeader(state) === undefined) fail('Timeout', 'context deadline exceeded');
  }

  protected isPublished(member: ModelMember): boolean {
    return member.publishedAt !== undefined && this.clock.now() >= member.publishedAt;
  }

  protected toMember(m: ModelMember): EtcdMember {
    const published = this.isPublished(m);
    return { id: m.id, name: published ? m.name : '', peerURLs: [m.peerURL], clientURLs: published && m.clientURL ? [m.clientURL] : [], isLearner: m.isLearner };
  }

  memberList(endpoints: readonly string[], linearizable = true): EtcdMember[] {
    const { state } = this.voterEndpoint(endpoints);
    if (linearizable) this.requireQuorum(state);
    return [...state.members.values()].map((m) => this.toMember(m));
  }

  protected connectedFor(member: ModelMember, ms: number): boolean {
    return member.connectedSince !== undefined && this.clock.now() - member.connectedSince >= ms;
  }

  /** etcd's mayAddMember: connected to every voter for the health interval (5 s), else "unhealthy cluster". */
  protected requireConnectedVoters(state: ModelCluster, self: ModelMember): void {
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
  protected checkLeaderBeforeRemoval(state: ModelCluster, member: ModelMember): void {
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

}

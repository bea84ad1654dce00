import { type EtcdAlarm } from '../ports/etcd-admin.ts';
import { ModelClusterRules } from './model-cluster-rules.ts';
import { type ModelClusterSnapshot } from './model-types.ts';

/**
 * An executable model of etcd membership and of machines, on the caller's clock, encoding the rules
 * measured on real etcd (docs/etcd-behaviour.md) and etcd's strict reconfiguration checks: one learner (or
 * --max-learners), promote refused until caught up, the 5 s connection rule for adds and for removing
 * a connected voter, quorum loss when running voters < quorum, unstarted members, removed members
 * exit, uint64 member IDs as decimal strings. Like etcd, it guards itself; the `violations` list
 * records changes that were applied although unsafe.
 */
export class ModelWorld extends ModelClusterRules {

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


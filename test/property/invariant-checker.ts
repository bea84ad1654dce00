import assert from 'node:assert/strict';
import { MEMBERSHIP_ACTIONS } from '../../src/bench/membership.ts';
import { quorum } from '../../src/domain/quorum.ts';
import { plan } from '../../src/planner/plan.ts';
import { toPlannerSpec } from '../../src/planner/spec.ts';
import type { Decision, Observed, ObservedMember } from '../../src/planner/types.ts';
import type { Simulation } from '../../src/sim/simulate.ts';

// Invariants 1-6 after every reconcile pass, against both what the controller saw and what the model
// knows to be true, and convergence (invariant 7) against the model once the faults stop.

/** The cluster every property scenario builds. */
export const NAME = 'prop';

/** What happened, for failure messages: every fault as it was applied or skipped. */
export interface Trace {
  log: string[];
  passes: number;
}

/**
 * Voters that answer their own status, know a leader and whose process runs: what the controller saw,
 * computed independently of the planner. (Status errors such as raised alarms do not make a voter
 * unhealthy; it still votes.)
 */
function observedHealthyVoters(observed: Observed, list: ObservedMember[]): ObservedMember[] {
  return list.filter((m) => {
    if (m.isLearner || m.status?.ok !== true || m.status.status.leaderId === '0') return false;
    const machine = observed.machines.find((x) => {
      const url = x.infra?.peerURL ?? x.record.peerURL;
      return url !== undefined && m.peerURLs.includes(url);
    });
    return machine?.infra?.memberRunning !== false;
  });
}

/**
 * Per-pass invariant checks. Each throws an AssertionError naming the invariant; fast-check then
 * shrinks the scenario.
 */
export class InvariantChecker {
  initMachine: string | undefined;
  passes = 0;

  constructor(
    private readonly sim: Simulation,
    private readonly trace: Trace,
  ) {}

  private fail(rule: string, detail: string): never {
    assert.fail(`${rule}: ${detail}\n  at virtual +${String(this.sim.clock.now() - 1_000_000)} ms\n  trace: ${this.trace.log.join(' | ')}`);
  }

  checkWorld(cp = this.sim.store.inspectControlPlane(NAME)): void {
    const { world } = this.sim;
    if (world.violations.length > 0) this.fail('model violation', JSON.stringify(world.violations));
    if (world.initCount > 1) this.fail('invariant 1', `the model saw ${String(world.initCount)} bootstraps`);
    const learners = world.learnerCount(NAME);
    const limit = world.learnerLimit(NAME);
    if (learners > limit) this.fail('invariant 2', `${String(learners)} learners, the lowest limit in force is ${String(limit)}`);
    if (cp?.initMachine !== undefined) {
      // Only an init whose member never started may be replaced, after AbandonInit listed it.
      const abandoned = this.initMachine !== undefined && cp.abandonedInits?.includes(this.initMachine) === true;
      if (this.initMachine !== undefined && this.initMachine !== cp.initMachine && !abandoned) this.fail('invariant 1', `init machine changed from ${this.initMachine} to ${cp.initMachine}`);
      this.initMachine = cp.initMachine;
    }
  }

  /** The onPass hook: after plan and record, before execute. */
  onPass(pass: { observed: Observed; decision: Decision; now: number }): void {
    this.passes++;
    this.trace.passes++;
    const { observed, decision, now } = pass;
    const cp = this.sim.store.inspectControlPlane(NAME);
    assert.ok(cp);
    this.checkWorld(cp);
    const spec = toPlannerSpec(cp.manifest);

    // Determinism: the planner is a pure function of (spec, observed, now); a second call on the same
    // snapshot (which the first call must not have changed) gives the same decision. Decisions are
    // plain data built in one order, so equal decisions serialize equally (the fast path); on a
    // difference deepStrictEqual decides and explains.
    const again = plan(spec, observed, now);
    if (JSON.stringify(again) !== JSON.stringify(decision)) {
      try {
        assert.deepStrictEqual(again, decision);
      } catch (error) {
        this.fail('determinism', error instanceof Error ? error.message : String(error));
      }
    }

    // Invariant 3, per decision: machine actions never carry a membership change.
    for (const action of decision.machineActions) {
      if (MEMBERSHIP_ACTIONS.has(action.kind)) this.fail('invariant 3', `membership action ${action.kind} among machine actions`);
    }
    const action = decision.membershipAction;
    if (!action) return;
    const snapshot = this.sim.world.snapshot(NAME);
    const list = observed.members.ok ? observed.members.list : [];
    const voters = list.filter((m) => !m.isLearner);
    const learners = list.filter((m) => m.isLearner);
    const healthy = observedHealthyVoters(observed, list);
    switch (action.kind) {
      case 'InitCluster':
        if (snapshot.members.length > 0) this.fail('invariant 1', `InitCluster ${action.machine} while the cluster has ${String(snapshot.members.length)} members`);
        if (!observed.members.ok || observed.members.list.length > 0 || observed.initMachine !== undefined) this.fail('invariant 1', 'InitCluster without an observed empty cluster');
        break;
      case 'AddLearner':
        if (learners.length >= spec.maxLearners) this.fail('invariant 2', `AddLearner ${action.machine} with ${String(learners.length)} learners observed`);
        break;
      case 'PromoteLearner':
        if (healthy.length + 1 < quorum(voters.length + 1)) {
          this.fail('invariant 4', `promote with ${String(healthy.length)}/${String(voters.length)} healthy voters`);
        }
        break;
      case 'RemoveMember': {
        const target = list.find((m) => m.id === action.memberId);
        if (!target || target.isLearner) break;
        if (voters.length <= 1) this.fail('invariant 6', `RemoveMember of the last voter ${action.memberId}`);
        const after = healthy.filter((m) => m.id !== target.id).length;
        if (after < quorum(voters.length - 1)) this.fail('invariant 4', `removal of ${action.memberId} leaves ${String(after)} healthy of ${String(voters.length - 1)}`);
        // Invariant 5's leader half is judged by the model, which knows who really leads (a stale voter
        // may name another): ModelWorld flags removing the leader, or removing while none leads, and
        // checkWorld fails on any flag.
        break;
      }
      case 'StartMember':
      case 'MoveLeader':
        break;
    }
  }

  /** Invariant 3 on the record: membership events never overlap in time. */
  checkEventLog(): void {
    const events = this.sim.store
      .inspect(NAME)
      .events.filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action))
      .sort((a, b) => a.at - b.at);
    for (let i = 1; i < events.length; i++) {
      const prev = events[i - 1]!;
      const next = events[i]!;
      if (next.at < (prev.endedAt ?? prev.at)) this.fail('invariant 3', `${prev.action ?? ''} ${prev.message} [${String(prev.at)}..${String(prev.endedAt)}] overlaps ${next.action ?? ''} ${next.message} at ${String(next.at)}`);
    }
  }
}

/** Invariant 7, against the model rather than the records. */
export function assertConvergedInModel(sim: Simulation, replicas: number, version: string, context: string): void {
  const snap = sim.world.snapshot(NAME);
  const detail = `${context}\n  model: ${JSON.stringify(snap)}`;
  const voters = snap.members.filter((m) => !m.isLearner);
  assert.equal(voters.length, replicas, `voters != replicas\n${detail}`);
  assert.equal(snap.members.filter((m) => m.isLearner).length, 0, `learners remain\n${detail}`);
  assert.ok(snap.leaderId !== undefined, `no leader\n${detail}`);
  for (const member of snap.members) {
    assert.ok(member.machine !== undefined, `member ${member.id} has no machine\n${detail}`);
    assert.ok(member.running && !member.stalled, `member ${member.id} unhealthy\n${detail}`);
  }
  const live = snap.machines.filter((m) => m.state !== 'Deleting');
  assert.equal(snap.machines.length, live.length, `machines still being deleted\n${detail}`);
  for (const machine of live) {
    assert.ok(machine.memberId !== undefined, `machine ${machine.name} has no member\n${detail}`);
    assert.equal(machine.version, version, `machine ${machine.name} runs ${machine.version}\n${detail}`);
  }
  assert.equal(live.length, replicas, `machines != replicas\n${detail}`);
  assert.equal(sim.store.inspect(NAME).machines.length, replicas, `machine records != replicas\n${detail}`);
}

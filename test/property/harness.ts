import assert from 'node:assert/strict';
import { validateControlPlane, type ControlPlane } from '../../src/api/control-plane.ts';
import { quorum } from '../../src/domain/quorum.ts';
import type { FailpointName } from '../../src/executor/failpoints.ts';
import { plan, REQUEUE } from '../../src/planner/plan.ts';
import { toPlannerSpec } from '../../src/planner/spec.ts';
import type { Decision, Observed, ObservedMember } from '../../src/planner/types.ts';
import type { RunResult } from '../../src/reconciler/run.ts';
import { Simulation } from '../../src/sim/simulate.ts';

/**
 * The property harness: builds a Simulation from a scenario (spec, faults at virtual times, controller
 * crashes at failpoints, spec changes), checks invariants 1-6 after every reconcile pass against both
 * what the controller saw and what the model knows to be true, and checks convergence (invariant 7)
 * against the model once the faults stop.
 */

export const NAME = 'prop';
const MEMBERSHIP_KINDS = new Set(['InitCluster', 'AddLearner', 'StartMember', 'PromoteLearner', 'MoveLeader', 'RemoveMember']);

export interface SpecInput {
  replicas: number;
  version: string;
  strategy: 'parallel' | 'serial';
  maxSurge: number;
  failureDomains: string[];
  provisioning: { minMs: number; maxMs: number };
  maxConcurrentProvisioning: number;
}

export type FaultKind = 'failProvisioning' | 'killMember' | 'neverStart' | 'stallLearner';

/** A fault fired at `atMs` after the start; `pick` chooses among the machines it can hit then. */
export interface Fault {
  atMs: number;
  kind: FaultKind;
  pick: number;
}

/** The controller crashes the `hit`-th time it reaches `failpoint`. */
export interface Crash {
  failpoint: FailpointName;
  hit: number;
}

/** A new desired state stored at `atMs` (replicas and/or the 3.4.23 -> 3.5.16 upgrade). */
export interface SpecChange {
  atMs: number;
  replicas: number;
  upgrade: boolean;
}

export interface Scenario {
  seed: number;
  spec: SpecInput;
  faults: Fault[];
  crashes: Crash[];
  changes: SpecChange[];
  /** Latency of every model call (0: instantaneous). */
  latencyMs: number;
}

export function manifestFor(spec: SpecInput): ControlPlane {
  return validateControlPlane({
    apiVersion: 'fastplane.dev/v1alpha1',
    kind: 'ControlPlane',
    metadata: { name: NAME },
    spec: {
      replicas: spec.replicas,
      version: spec.version,
      provider: { provisioningDelay: `${String(spec.provisioning.minMs)}ms-${String(spec.provisioning.maxMs)}ms`, failureDomains: spec.failureDomains },
      scaleUp: { strategy: spec.strategy, maxConcurrentProvisioning: spec.maxConcurrentProvisioning },
      // maxSurge 0 (remove before add) needs 3 replicas: below that, surge by one.
      rollout: { maxSurge: spec.replicas < 3 && spec.maxSurge === 0 ? 1 : spec.maxSurge },
    },
  });
}

/** What happened, for failure messages: every fault as it was applied or skipped. */
export interface Trace {
  log: string[];
  passes: number;
}

function describeScenario(s: Scenario): string {
  return JSON.stringify(s);
}

/** Voters that answer their own status with no errors, know a leader and whose process runs. */
function observedHealthyVoters(observed: Observed, list: ObservedMember[]): ObservedMember[] {
  return list.filter((m) => {
    if (m.isLearner || m.status?.ok !== true) return false;
    const { status } = m.status;
    if (status.errors.length > 0 || status.leaderId === '0') return false;
    const machine = observed.machines.find((x) => (x.infra?.peerURL ?? x.record.peerURL) !== undefined && m.peerURLs.includes(x.infra?.peerURL ?? x.record.peerURL ?? ''));
    return machine?.infra?.memberRunning !== false;
  });
}

function observedLeader(list: ObservedMember[]): string | undefined {
  const leaders = new Set(list.filter((m) => !m.isLearner && m.status?.ok === true).map((m) => (m.status?.ok === true ? m.status.status.leaderId : '')));
  return leaders.size === 1 ? [...leaders][0] : undefined;
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

  checkWorld(): void {
    const { world } = this.sim;
    if (world.violations.length > 0) this.fail('model violation', JSON.stringify(world.violations));
    if (world.initCount > 1) this.fail('invariant 1', `the model saw ${String(world.initCount)} bootstraps`);
    const cp = this.sim.store.getControlPlane(NAME);
    const learners = world.learnerCount(NAME);
    if (cp && learners > cp.manifest.spec.etcd.maxLearners) this.fail('invariant 2', `${String(learners)} learners, limit ${String(cp.manifest.spec.etcd.maxLearners)}`);
    if (cp?.initMachine !== undefined) {
      if (this.initMachine !== undefined && this.initMachine !== cp.initMachine) this.fail('invariant 1', `init machine changed from ${this.initMachine} to ${cp.initMachine}`);
      this.initMachine = cp.initMachine;
    }
  }

  /** The onPass hook: after plan and record, before execute. */
  onPass(pass: { observed: Observed; decision: Decision; now: number }): void {
    this.passes++;
    this.trace.passes++;
    const { observed, decision, now } = pass;
    this.checkWorld();
    const cp = this.sim.store.getControlPlane(NAME);
    assert.ok(cp);
    const spec = toPlannerSpec(cp.manifest);

    // Determinism: the planner is a pure function of (spec, observed, now).
    const again = plan(spec, structuredClone(observed), now);
    try {
      assert.deepStrictEqual(again, decision);
      assert.deepStrictEqual(plan(spec, structuredClone(observed), now), again);
    } catch (error) {
      this.fail('determinism', error instanceof Error ? error.message : String(error));
    }

    // Invariant 3, per decision: machine actions never carry a membership change.
    for (const action of decision.machineActions) {
      if (MEMBERSHIP_KINDS.has(action.kind)) this.fail('invariant 3', `membership action ${action.kind} among machine actions`);
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
        if (observedLeader(list) === target.id) this.fail('invariant 5', `RemoveMember of the observed leader ${target.id} without moving leadership first`);
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
      .listEvents(NAME)
      .filter((e) => e.action !== undefined && MEMBERSHIP_KINDS.has(e.action))
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
  assert.equal(sim.store.listMachines(NAME).length, replicas, `machine records != replicas\n${detail}`);
}

/** Applies one fault to a machine it can hit now; returns what it did (or why it did nothing). */
export function applyFault(sim: Simulation, fault: Fault): string {
  const { world } = sim;
  const snap = world.snapshot(NAME);
  const memberOf = (memberId: string | undefined) => snap.members.find((m) => m.id === memberId);
  const pickFrom = (names: string[]): string | undefined => names[fault.pick % Math.max(1, names.length)];
  let target: string | undefined;
  switch (fault.kind) {
    case 'failProvisioning':
      target = pickFrom(snap.machines.filter((m) => m.state === 'Provisioning').map((m) => m.name));
      if (target !== undefined) world.failProvisioning(target);
      break;
    case 'neverStart':
      // Only once a cluster exists: an init member that never starts can never be replaced (invariant 1).
      if (snap.members.length === 0) return `${fault.kind}: skipped, no cluster yet`;
      target = pickFrom(snap.machines.filter((m) => !m.started && (m.state === 'Provisioning' || m.state === 'Provisioned')).map((m) => m.name));
      if (target !== undefined) world.neverStart(target);
      break;
    case 'stallLearner':
      target = pickFrom(snap.machines.filter((m) => m.running && memberOf(m.memberId)?.isLearner === true).map((m) => m.name));
      if (target !== undefined) world.stallLearner(target);
      break;
    case 'killMember': {
      const candidates = snap.machines.filter((m) => m.running && memberOf(m.memberId) !== undefined);
      target = pickFrom(candidates.map((m) => m.name));
      const member = memberOf(candidates.find((m) => m.name === target)?.memberId);
      if (target === undefined || !member) break;
      // The environment we promise convergence for never kills a majority of voters at once.
      const voters = world.voterCount(NAME);
      if (!member.isLearner && world.healthyVoterCount(NAME) - 1 < quorum(voters)) return `${fault.kind}: skipped ${target}, would lose quorum`;
      world.killMember(target);
      break;
    }
  }
  return target === undefined ? `${fault.kind}: no target` : `${fault.kind} ${target}`;
}

export interface ScenarioResult {
  result: RunResult & { crashes: number };
  /** Virtual ms from the last fault or spec change to convergence. */
  settleMs: number;
  checker: InvariantChecker;
  sim: Simulation;
}

/** A generous bound for convergence once faults stop; the tests report how close runs come to it. */
export function settleBoundMs(s: Scenario): number {
  const maxReplicas = Math.max(s.spec.replicas, ...s.changes.map((c) => c.replicas));
  const perMachine = s.spec.provisioning.maxMs + 8000;
  const learnerStuck = 120_000;
  return learnerStuck + 20_000 + (2 * maxReplicas + s.faults.length + 2) * perMachine + 60_000;
}

/**
 * Runs a scenario: faults fire at their virtual times, spec changes are stored between passes, the
 * controller crashes at its failpoints and restarts from the records. Between faults a converged
 * controller idles as a watching controller would. Afterwards it must converge within the bound.
 */
export async function runScenario(s: Scenario): Promise<ScenarioResult> {
  const hits = new Map<FailpointName, number>();
  const crashAt = (name: FailpointName): boolean => {
    const hit = (hits.get(name) ?? 0) + 1;
    hits.set(name, hit);
    return s.crashes.some((c) => c.failpoint === name && c.hit === hit);
  };
  let spec = s.spec;
  const sim = new Simulation(manifestFor(spec), { seed: s.seed, crashAt, timings: { callLatency: { minMs: 0, maxMs: s.latencyMs } } });
  const trace: Trace = { log: [`scenario ${describeScenario(s)}`], passes: 0 };
  const checker = new InvariantChecker(sim, trace);
  const start = sim.clock.now();
  for (const fault of s.faults) {
    sim.clock.schedule(start + fault.atMs, () => {
      trace.log.push(`+${String(sim.clock.now() - start)}ms ${applyFault(sim, fault)}`);
    });
  }
  const pending = [...s.changes].sort((a, b) => a.atMs - b.atMs);
  const onPass = (pass: { observed: Observed; decision: Decision; now: number }): void => {
    checker.onPass(pass);
    // Spec changes land between plan and execute: the executor may already see the new spec.
    while (pending.length > 0 && pass.now >= start + (pending[0]?.atMs ?? 0)) {
      const change = pending.shift()!;
      spec = { ...spec, replicas: change.replicas, version: change.upgrade ? '3.5.16' : spec.version };
      sim.apply(manifestFor(spec));
      trace.log.push(`+${String(pass.now - start)}ms apply replicas=${String(spec.replicas)} version=${spec.version}`);
    }
  };
  const lastEvent = start + Math.max(0, ...s.faults.map((f) => f.atMs), ...s.changes.map((c) => c.atMs)) + 1;
  while (sim.clock.now() < lastEvent || pending.length > 0) {
    const r = await sim.run(Math.max(1, lastEvent - sim.clock.now()), onPass);
    if (r.outcome === 'Converged' && sim.clock.now() < lastEvent) await sim.clock.sleep(Math.min(REQUEUE.idle, lastEvent - sim.clock.now()));
    if (r.outcome === 'Converged' && sim.clock.now() >= lastEvent && pending.length > 0) {
      // A change due now is applied by the next pass.
      continue;
    }
  }
  const settleFrom = sim.clock.now();
  const bound = settleBoundMs(s);
  const result = await sim.run(bound, onPass);
  checker.checkWorld();
  checker.checkEventLog();
  const context = `outcome ${result.outcome} after ${String(sim.clock.now() - settleFrom)} ms (bound ${String(bound)}), last decision waits: ${JSON.stringify(result.decision.waits)}\n  trace: ${trace.log.join(' | ')}`;
  assert.equal(result.outcome, 'Converged', context);
  assertConvergedInModel(sim, spec.replicas, spec.version, context);
  return { result, settleMs: sim.clock.now() - Math.max(settleFrom, lastEvent), checker, sim };
}

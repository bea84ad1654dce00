import assert from 'node:assert/strict';
import { validateControlPlane, type ControlPlane } from '../../src/api/control-plane.ts';
import { quorum } from '../../src/domain/quorum.ts';
import type { FailpointName } from '../../src/executor/failpoints.ts';
import { REQUEUE } from '../../src/planner/requeue.ts';
import type { Decision, Observed } from '../../src/planner/types.ts';
import type { RunResult } from '../../src/reconciler/run.ts';
import { Simulation } from '../../src/sim/simulate.ts';
import { assertConvergedInModel, InvariantChecker, NAME, type Trace } from './invariant-checker.ts';

/**
 * The property harness: builds a Simulation from a scenario (spec, faults at virtual times, controller
 * crashes at failpoints, spec changes) and runs it with the invariant checker (invariant-checker.ts)
 * on every pass.
 */

export interface SpecInput {
  replicas: number;
  version: string;
  strategy: 'parallel' | 'serial';
  maxSurge: number;
  failureDomains: string[];
  provisioning: { minMs: number; maxMs: number };
  maxConcurrentProvisioning: number;
  /** remediation.learnerStuckAfter and unhealthyAfter, in ms. */
  learnerStuckAfterMs: number;
  unhealthyAfterMs: number;
  /** fastplane: the model's members skip etcd's add/remove checks and only the planner guards (default etcd). */
  reconfigurationCheck?: 'etcd' | 'fastplane';
}

export type FaultKind = 'failProvisioning' | 'killMember' | 'neverStart' | 'stallLearner' | 'staleLeader';

/** How long a voter keeps naming the old leader after a staleLeader fault moved leadership. */
export const STALE_LEADER_MS = 3000;

/** Action kinds a fault can lie in wait for. */
export type TriggerKind = 'RequestMachineDeletion' | 'CreateMachine' | 'InitCluster' | 'AddLearner' | 'PromoteLearner' | 'RemoveMember' | 'MoveLeader';

/**
 * A fault fired at `atMs` after the start; `pick` chooses among the machines it can hit then. With a
 * `trigger`, it waits from `atMs` on for a pass that decides such an action and fires between that
 * plan and its execution: the executor then acts on a stale observation.
 */
export interface Fault {
  atMs: number;
  kind: FaultKind;
  pick: number;
  trigger?: TriggerKind;
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
      remediation: { learnerStuckAfter: `${String(spec.learnerStuckAfterMs)}ms`, unhealthyAfter: `${String(spec.unhealthyAfterMs)}ms` },
      etcd: { reconfigurationCheck: spec.reconfigurationCheck ?? 'etcd' },
    },
  });
}

function describeScenario(s: Scenario): string {
  return JSON.stringify(s);
}

/** How long a fault waits for a machine it can hit (a learner to stall, a machine to fail). */
export const FAULT_PATIENCE_MS = 60_000;
const FAULT_POLL_MS = 50;

/**
 * Applies one fault to a machine it can hit now; returns what it did, or undefined when nothing can
 * be hit yet (no learner to stall, no machine provisioning, a kill that would lose quorum).
 */
export function applyFault(sim: Simulation, fault: Fault): string | undefined {
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
      if (snap.members.length === 0) return undefined;
      target = pickFrom(snap.machines.filter((m) => !m.started && (m.state === 'Provisioning' || m.state === 'Provisioned')).map((m) => m.name));
      if (target !== undefined) world.neverStart(target);
      break;
    case 'stallLearner':
      target = pickFrom(snap.machines.filter((m) => m.running && memberOf(m.memberId)?.isLearner === true).map((m) => m.name));
      if (target !== undefined) world.stallLearner(target);
      break;
    case 'staleLeader': {
      // Leadership moves to another running voter while one voter keeps naming the old leader.
      const voters = snap.members.filter((m) => !m.isLearner && m.running && m.machine !== undefined);
      const others = voters.filter((m) => m.id !== snap.leaderId);
      const to = others[fault.pick % Math.max(1, others.length)];
      const laggards = voters.filter((m) => m.id !== to?.id);
      const laggard = laggards[Math.floor(fault.pick / Math.max(1, others.length)) % Math.max(1, laggards.length)];
      if (snap.leaderId === undefined || to?.machine === undefined || laggard?.machine === undefined) return undefined;
      world.transferLeadership(to.machine, laggard.machine, STALE_LEADER_MS);
      return `staleLeader ${to.machine} leads, ${laggard.machine} still names the old leader`;
    }
    case 'killMember': {
      const candidates = snap.machines.filter((m) => m.running && memberOf(m.memberId) !== undefined);
      target = pickFrom(candidates.map((m) => m.name));
      const member = memberOf(candidates.find((m) => m.name === target)?.memberId);
      if (target === undefined || !member) break;
      // The environment we promise convergence for never kills a majority of voters at once.
      const voters = world.voterCount(NAME);
      if (!member.isLearner && world.healthyVoterCount(NAME) - 1 < quorum(voters)) return undefined;
      world.killMember(target);
      break;
    }
  }
  return target === undefined ? undefined : `${fault.kind} ${target}`;
}

/**
 * Schedules a fault: from its time on it hits the first machine it can, or expires after
 * FAULT_PATIENCE_MS. A triggered fault is armed at its time and fired by `fireTriggered`.
 */
function scheduleFault(sim: Simulation, start: number, fault: Fault, trace: Trace, outstanding: Set<Fault>, armed: Set<Fault>): void {
  outstanding.add(fault);
  if (fault.trigger !== undefined) {
    sim.clock.schedule(start + fault.atMs, () => armed.add(fault));
    sim.clock.schedule(start + fault.atMs + FAULT_PATIENCE_MS, () => {
      if (!outstanding.has(fault)) return;
      trace.log.push(`+${String(sim.clock.now() - start)}ms ${fault.kind} on ${fault.trigger ?? ''}: expired`);
      armed.delete(fault);
      outstanding.delete(fault);
    });
    return;
  }
  const attempt = (): void => {
    const now = sim.clock.now();
    const done = applyFault(sim, fault);
    if (done !== undefined) trace.log.push(`+${String(now - start)}ms ${done}`);
    else if (now - start - fault.atMs < FAULT_PATIENCE_MS) {
      sim.clock.schedule(now + FAULT_POLL_MS, attempt);
      return;
    } else trace.log.push(`+${String(now - start)}ms ${fault.kind}: expired, nothing to hit`);
    outstanding.delete(fault);
  };
  sim.clock.schedule(start + fault.atMs, attempt);
}

/** Fires the armed faults waiting for an action this decision takes (called between plan and execute). */
function fireTriggered(sim: Simulation, start: number, decision: Decision, trace: Trace, outstanding: Set<Fault>, armed: Set<Fault>): void {
  const kinds = new Set<string>(decision.machineActions.map((a) => a.kind));
  if (decision.membershipAction) kinds.add(decision.membershipAction.kind);
  for (const fault of [...armed]) {
    if (fault.trigger === undefined || !kinds.has(fault.trigger)) continue;
    const done = applyFault(sim, fault);
    if (done === undefined) continue;
    trace.log.push(`+${String(sim.clock.now() - start)}ms on ${fault.trigger}: ${done}`);
    armed.delete(fault);
    outstanding.delete(fault);
  }
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
  return s.spec.learnerStuckAfterMs + s.spec.unhealthyAfterMs + (2 * maxReplicas + s.faults.length + 2) * perMachine + 60_000;
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
  const outstanding = new Set<Fault>();
  const armed = new Set<Fault>();
  for (const fault of s.faults) scheduleFault(sim, start, fault, trace, outstanding, armed);
  const pending = [...s.changes].sort((a, b) => a.atMs - b.atMs);
  const onPass = (pass: { observed: Observed; decision: Decision; now: number }): void => {
    checker.onPass(pass);
    fireTriggered(sim, start, pass.decision, trace, outstanding, armed);
    // Spec changes land between plan and execute: the executor may already see the new spec.
    while (pending.length > 0 && pass.now >= start + (pending[0]?.atMs ?? 0)) {
      const change = pending.shift()!;
      spec = { ...spec, replicas: change.replicas, version: change.upgrade ? '3.5.16' : spec.version };
      // The memory store stores it within this call: the executor of this very pass may see it.
      void sim.apply(manifestFor(spec));
      trace.log.push(`+${String(pass.now - start)}ms apply replicas=${String(spec.replicas)} version=${spec.version}`);
    }
  };
  const lastChange = start + Math.max(0, ...s.changes.map((c) => c.atMs)) + 1;
  // Until every fault has fired or expired and every change is stored; a converged controller idles.
  while (outstanding.size > 0 || pending.length > 0 || sim.clock.now() < lastChange) {
    const horizon = Math.max(lastChange, ...[...outstanding].map((f) => start + f.atMs + FAULT_PATIENCE_MS + FAULT_POLL_MS));
    // A converged controller decides nothing, so armed faults wait; the idle loop below lets them expire.
    const r = await sim.run(Math.max(1, horizon - sim.clock.now()), onPass);
    if (r.outcome === 'Converged') await sim.clock.sleep(REQUEUE.idle);
  }
  const settleFrom = sim.clock.now();
  const bound = settleBoundMs(s);
  const result = await sim.run(bound, onPass);
  checker.checkWorld();
  checker.checkEventLog();
  const context = `outcome ${result.outcome} after ${String(sim.clock.now() - settleFrom)} ms (bound ${String(bound)}), last decision waits: ${JSON.stringify(result.decision.waits)}\n  trace: ${trace.log.join(' | ')}`;
  assert.equal(result.outcome, 'Converged', context);
  assertConvergedInModel(sim, spec.replicas, spec.version, context);
  return { result, settleMs: sim.clock.now() - settleFrom, checker, sim };
}

/**
 * The critical-path lower bound of a bring-up of one design: the first ready machine initialised (or
 * restored from a snapshot), every other member joining it as a learner that catches up from the
 * leader. It says how soon a controller of that design could have every machine a voter, given when
 * the provider made each machine ready, what an init (or restore) and a join cost on this host (the
 * fastest of warm samples on a separate cluster, never taken from the run being judged), and etcd's
 * rule for when a learner may be added. It does not bound other designs: every member restoring the
 * same snapshot at once (etcd's disaster-recovery shape) sends no catch-up through the leader and can
 * be faster. Pure, so every bound can be recomputed by hand from the inputs kept with it.
 *
 * The model, in seconds from the start of the run:
 *  - the first ready machine is initialised: it serves at ready + init;
 *  - with a learner limit of 1, joins go one at a time: an add waits for the previous promotion, for
 *    its machine to be ready, and for the add rule; it is promoted `join` after it was added;
 *  - with a limit L above 1 (etcd 3.6 `--max-learners`), an add waits for a free learner slot (fewer
 *    than L learners not yet promoted) instead of the previous promotion, and adds still go one after
 *    another; promotions stay one at a time, each `join` after its own add at the earliest;
 *  - with a keyspace, every learner receives the leader's whole database as a snapshot, and the
 *    leader cannot send faster than its calibrated outbound rate (several readers at once, through
 *    its own link): the n-th promotion comes no sooner than n snapshots' bytes after the first add;
 *  - a new voter counts as connected to the leader from its add, the earliest its peer link can exist,
 *    which keeps the bound a lower bound;
 *  - machines join in the order they became ready (all joins cost the same, so this is optimal).
 *
 * With the Kubernetes control plane on machines that share one host's cores (the local provider's),
 * the bound also counts that CPU: each machine's components spend a calibrated least CPU to start,
 * work that cannot start before the machine is ready, and all of it has to be done on the host's
 * cores (shared-cpu-bound.ts). The bound is the later of the critical path and that work term, and
 * says which binds; the milestones are the critical path's, as the work term is an end bound only.
 */

import { PEER_CONNECTED_FOR_ADD_MS } from '../domain/quorum.ts';
import { sharedCpuTerm, type SharedCpuTerm } from './shared-cpu-bound.ts';

/**
 * When etcd accepts a learner add (its `--strict-reconfig-check`, on by default):
 *  - `all-voters`: every voter other than the leader connected for `connectedSeconds` (etcd 3.4, 3.5 before 3.5.30);
 *  - `quorum-of-resulting`: a quorum of the voters after the add (the new member counted but not
 *    connected, the leader connected) connected that long (3.5.30 and later): no wait for some adds;
 *  - `none`: no wait (the check turned off, a controller checking health itself).
 */
export type AddRule = 'all-voters' | 'quorum-of-resulting' | 'none';

/** etcd's HealthInterval: how long a peer must have been connected before an add is accepted. */
export const PEER_CONNECTED_SECONDS = PEER_CONNECTED_FOR_ADD_MS / 1000;

export interface BoundInputs {
  /** Per machine, when the provider made it ready, in seconds from the start of the run. */
  readySeconds: number[];
  /** Calibrated 1-member init to serving. */
  initSeconds: number;
  /** Calibrated idle learner add to promoted. */
  joinSeconds: number;
  addRule: AddRule;
  connectedSeconds: number;
  /** Voters already serving (connected long ago) when the run starts: 0 for a bring-up, 1 for the scale-up after a preload. */
  existingVoters: number;
  /** The most learners etcd accepts at once (1 below etcd 3.6); absent means 1. */
  learnerLimit?: number;
  /** With a keyspace: each learner's snapshot and the leader's calibrated outbound rate; absent: no such term. */
  leaderSend?: { bytesPerLearner: number; bytesPerSecond: number };
  /**
   * With the Kubernetes control plane: each machine, once its member votes, starts its kube-apiserver
   * (calibrated start to /readyz ok), and once that is ready and in the endpoint, its
   * controller-manager and scheduler (calibrated start to both healthy); absent: an etcd-only bound.
   * `cpu`: the machines share the host's `cores`, and each machine's apiserver and controllers spend
   * at least these CPU seconds to start (calibrated, the member's and apiserver's share included);
   * absent: every machine has CPUs of its own (no shared-CPU term).
   */
  kubernetes?: { apiserverSeconds: number; controllersSeconds: number; cpu?: { cores: number; apiserverCpuSeconds: number; controllersCpuSeconds: number } };
}

export interface BoundJoin {
  /** Index into readySeconds. */
  machine: number;
  addAt: number;
  promotedAt: number;
  /** How long the add rule alone held this add back, past the learner slot and the machine being ready. */
  ruleWaitSeconds: number;
}

/** One machine's Kubernetes components on the bound's clock: kubeadm's stacked join after its member votes. */
export interface BoundMachineComponents {
  /** Index into readySeconds. */
  machine: number;
  voterAt: number;
  apiserverReadyAt: number;
  /** Controller-manager and scheduler healthy: the machine ready. */
  readyAt: number;
}

export interface Bound {
  /** Which design this bounds, in words: a bound says nothing of another design. */
  design: string;
  /** The later of the critical path and the shared-CPU term. */
  seconds: number;
  /** Which of the two `seconds` is: the critical path's end, or the shared-CPU term's. */
  binding: 'critical-path' | 'shared-cpu';
  /** The critical path's end alone: the last vote, or with the Kubernetes control plane the last machine ready. */
  criticalPathSeconds: number;
  /**
   * With the Kubernetes control plane on shared cores: each machine's start-up CPU released at its
   * ready time, and the release time from which the work over the cores is the longest.
   */
  sharedCpu?: SharedCpuTerm;
  /** When the init member serves; null when the run starts with voters. */
  initDoneAt: number | null;
  joins: BoundJoin[];
  /** With the Kubernetes control plane: each machine's components, the init machine first. */
  components?: BoundMachineComponents[];
}

const quorum = (members: number): number => Math.floor(members / 2) + 1;
const round = (s: number): number => Math.round(s * 1000) / 1000;

/** The earliest time the rule lets a learner be added, given when each non-leader voter connected. */
export function addAllowedAt(rule: AddRule, connectedSince: readonly number[], connectedSeconds: number): number {
  if (rule === 'none' || connectedSince.length === 0) return -Infinity;
  const sorted = [...connectedSince].sort((a, b) => a - b);
  if (rule === 'all-voters') return (sorted.at(-1) ?? -Infinity) + connectedSeconds;
  // Voters after the add: the current ones (leader included) plus the new member, which is not connected.
  const voters = connectedSince.length + 1;
  const needed = Math.min(sorted.length, quorum(voters + 1) - 1);
  return needed === 0 ? -Infinity : (sorted[needed - 1] ?? -Infinity) + connectedSeconds;
}

export function criticalPathBound(inputs: BoundInputs): Bound {
  const ready = inputs.readySeconds.map((at, machine) => ({ at, machine })).sort((a, b) => a.at - b.at);
  let freeAt = 0;
  let initDoneAt: number | null = null;
  let initMachine: number | undefined;
  const connectedSince: number[] = Array.from({ length: Math.max(0, inputs.existingVoters - 1) }, () => -Infinity);
  if (inputs.existingVoters === 0) {
    const first = ready.shift();
    if (first === undefined) return { design: designOf(inputs), seconds: 0, binding: 'critical-path', criticalPathSeconds: 0, initDoneAt: null, joins: [] };
    initDoneAt = first.at + inputs.initSeconds;
    initMachine = first.machine;
    freeAt = initDoneAt;
  }
  const limit = Math.max(1, inputs.learnerLimit ?? 1);
  const joins: BoundJoin[] = [];
  // freeAt: when the cluster may take the next add (init done, the previous add made); promotedTimes:
  // when each learner slot freed (its learner promoted), so with a limit of 1 an add waits for the last.
  let lastPromotedAt = freeAt;
  const promotedTimes: number[] = [];
  for (const { at, machine } of ready) {
    const slotFreeAt = promotedTimes.length < limit ? -Infinity : (promotedTimes[promotedTimes.length - limit] ?? -Infinity);
    const otherwise = Math.max(freeAt, slotFreeAt, at);
    // etcd's add rule counts voting members only: a learner counts from its promotion on. While a
    // learner slot is free, a controller may add before it promotes the learners already in, so then
    // their promotions set no rule on this add (a bound must not hold the run to an order it need not keep).
    const afterPromotion = promotedTimes.length >= limit;
    let addAt = otherwise;
    for (let settled = false; !settled; ) {
      const voters = [...connectedSince, ...(afterPromotion ? joins.filter((j) => j.promotedAt <= addAt).map((j) => j.addAt) : [])];
      const allowed = Math.max(otherwise, addAllowedAt(inputs.addRule, voters, inputs.connectedSeconds));
      settled = allowed <= addAt;
      addAt = Math.max(addAt, allowed);
    }
    const firstAddAt = joins[0]?.addAt ?? addAt;
    const sent = inputs.leaderSend === undefined ? -Infinity : firstAddAt + ((joins.length + 1) * inputs.leaderSend.bytesPerLearner) / inputs.leaderSend.bytesPerSecond;
    const promotedAt = Math.max(addAt + inputs.joinSeconds, lastPromotedAt, sent);
    joins.push({ machine, addAt: round(addAt), promotedAt: round(promotedAt), ruleWaitSeconds: round(addAt - otherwise) });
    promotedTimes.push(promotedAt);
    freeAt = addAt;
    lastPromotedAt = promotedAt;
  }
  const base = { design: designOf(inputs), initDoneAt: initDoneAt === null ? null : round(initDoneAt), joins };
  if (inputs.kubernetes === undefined) return { ...base, seconds: round(lastPromotedAt), binding: 'critical-path', criticalPathSeconds: round(lastPromotedAt) };
  const voters = [...(initMachine === undefined || initDoneAt === null ? [] : [{ machine: initMachine, voterAt: initDoneAt }]), ...joins.map((j) => ({ machine: j.machine, voterAt: j.promotedAt }))];
  const components = kubernetesJoins(voters, inputs.kubernetes);
  const criticalPathSeconds = round(Math.max(lastPromotedAt, ...components.map((c) => c.readyAt)));
  const cpu = inputs.kubernetes.cpu;
  // The simplest release time that holds for every machine, whichever joins first: its ready time.
  const sharedCpu = cpu === undefined ? null : sharedCpuTerm(cpu.cores, inputs.readySeconds.map((releaseAt, machine) => ({ machine, releaseAt, cpuSeconds: cpu.apiserverCpuSeconds + cpu.controllersCpuSeconds })));
  const withComponents = { ...base, criticalPathSeconds, components, ...(sharedCpu === null ? {} : { sharedCpu }) };
  return sharedCpu !== null && sharedCpu.seconds > criticalPathSeconds
    ? { ...withComponents, seconds: sharedCpu.seconds, binding: 'shared-cpu' }
    : { ...withComponents, seconds: criticalPathSeconds, binding: 'critical-path' };
}

/**
 * kubeadm's stacked join after the member votes, as the planner orders it (src/planner/components.ts):
 * the apiserver starts on a voter, the endpoint takes it once /readyz answers, then the
 * controller-manager and the scheduler start. Each machine's start-up overlaps the other joins, so it
 * adds to the critical path only after the last vote; routing the endpoint is taken as free.
 */
function kubernetesJoins(voters: { machine: number; voterAt: number }[], costs: NonNullable<BoundInputs['kubernetes']>): BoundMachineComponents[] {
  return voters.map(({ machine, voterAt }) => {
    const apiserverReadyAt = voterAt + costs.apiserverSeconds;
    return { machine, voterAt: round(voterAt), apiserverReadyAt: round(apiserverReadyAt), readyAt: round(apiserverReadyAt + costs.controllersSeconds) };
  });
}

function designOf(inputs: BoundInputs): string {
  const etcd = inputs.existingVoters === 0 ? 'the first ready machine initialised, every other member joining it as a learner that catches up from the leader' : 'learners joining the serving members and catching up from the leader';
  return inputs.kubernetes === undefined
    ? `etcd only: ${etcd}`
    : `Kubernetes control plane, kubeadm's stacked topology: ${etcd}; on each machine once its member votes, kube-apiserver started, ready (/readyz), in the endpoint, then controller-manager and scheduler${inputs.kubernetes.cpu === undefined ? '' : `; every machine's start-up CPU done on the host's ${String(inputs.kubernetes.cpu.cores)} shared cores`}`;
}

/** The add rule of an etcd version, with etcd's own check on (`strict`) or off. */
export function addRuleFor(version: string, strict = true): AddRule {
  if (!strict) return 'none';
  const [major = 0, minor = 0, patch = 0] = version.split('.').map(Number);
  const atLeast3530 = major > 3 || (major === 3 && (minor > 5 || (minor === 5 && patch >= 30)));
  return atLeast3530 ? 'quorum-of-resulting' : 'all-voters';
}

import { activeMachines, type Step } from './step.ts';

/** Poll intervals: fast while etcd is about to change (catch-up, 5 s rule), slower while machines provision. */
export const REQUEUE = { now: 0, fast: 100, retry: 250, slow: 500, idle: 5000 } as const;

/**
 * etcd refusals that lapse by themselves within a few hundred ms (the 5 s rule's clock, a learner's
 * raft match catching up with what its status already shows): the run retries them at the fast
 * interval, since a refusal costs etcd next to nothing and every 100 ms waited is promotion latency.
 */
export const FAST_RETRY: ReadonlySet<string> = new Set(['UnhealthyCluster', 'NotInSync']);

/** Waits that end within a few hundred ms, on etcd's side or as readings accumulate. */
const FAST_WAITS = new Set(['VoterUnhealthy', 'VoterOutOfStep', 'ConnectivityUnproven', 'VotersNotConnected', 'PromotionQuorumUnproven']);

/**
 * Soonest a provisioning machine is expected ready, from the provider's hint: the pass that sees it
 * ready runs then, not up to a poll interval later (1 ms after, so the machine is ready when read).
 */
function untilExpectedReady(step: Step): number | undefined {
  const { now } = step.view;
  const due = activeMachines(step).flatMap((m) => (m.infra?.state === 'Provisioning' && m.infra.expectedReadyAt !== undefined ? [m.infra.expectedReadyAt - now + 1] : []));
  return due.length === 0 ? undefined : Math.max(1, Math.min(...due));
}

export function requeueAfter(step: Step, actions: number, converged: boolean): number {
  if (actions > 0) return REQUEUE.now;
  if (converged) return REQUEUE.idle;
  if (step.waits.some((w) => w.code.startsWith('Retry'))) return REQUEUE.retry;
  if (step.view.learners.length > 0 || step.waits.some((w) => FAST_WAITS.has(w.code))) return REQUEUE.fast;
  return Math.min(REQUEUE.slow, untilExpectedReady(step) ?? REQUEUE.slow);
}

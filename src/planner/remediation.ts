import type { RemediationRecord } from '../domain/machine.ts';
import { nextRemediation } from '../domain/remediation.ts';
import { initNeverStarted } from './init-retry.ts';
import { byOrdinal, isGone, nameOf, type Step } from './step.ts';
import type { MarkMachineFailed, ObservedMachine, Wait } from './types.ts';
import { isCaughtUp } from './view.ts';

/**
 * Remediation limits as KCP applies them: a sequence of failures within minHealthyPeriod counts
 * retries; retries wait retryPeriod apart and stop at maxRetry. Returns a wait when not allowed now.
 */
function remediationGate(step: Step, last: RemediationRecord | undefined): Wait | undefined {
  const { spec, now } = step.view;
  if (!last || now - last.at >= spec.remediation.minHealthyPeriodMs) return undefined;
  if (now - last.at < spec.remediation.retryPeriodMs) {
    return { code: 'RemediationDeferred', message: `last remediation (${last.machine}) was less than retryPeriod ago` };
  }
  if (last.retryCount >= spec.remediation.maxRetry) {
    return { code: 'CannotBeRemediated', message: `remediation retried ${String(last.retryCount)} times (maxRetry ${String(spec.remediation.maxRetry)})` };
  }
  return undefined;
}

function failureOf(step: Step, machine: ObservedMachine): { reason: string; message: string } | undefined {
  const { view } = step;
  const { record, infra } = machine;
  if (infra?.state === 'Failed') return { reason: 'ProvisioningFailed', message: infra.failureMessage ?? 'provisioning failed' };
  if (!infra) return record.phase === 'Pending' ? undefined : { reason: 'MachineMissing', message: 'the provider no longer has this machine' };
  const initFailure = initNeverStarted(view, machine);
  if (initFailure) return initFailure;
  if (!view.membersKnown) return undefined;
  const member = view.memberOf(machine);
  if (!member) {
    if (record.memberId !== undefined) return { reason: 'MemberLost', message: `member ${record.memberId} left the cluster` };
    return undefined;
  }
  if (member.isLearner) return learnerFailure(step, machine);
  const apiserver = apiserverFailure(step, machine);
  if (apiserver) return apiserver;
  const since = record.unhealthySince;
  if (since !== undefined && view.now - since >= view.spec.remediation.unhealthyAfterMs && !view.isHealthyVoter(member) && view.hasQuorum) {
    return { reason: 'MemberUnhealthy', message: `member unhealthy since ${String(view.now - since)} ms (unhealthyAfter ${String(view.spec.remediation.unhealthyAfterMs)} ms)` };
  }
  return undefined;
}

/**
 * A Kubernetes machine whose apiserver, ready once, has not been for unhealthyAfter: replaced (as a
 * MachineHealthCheck on its pod would have it), but only while another machine's apiserver serves, so
 * the control plane never takes its last API away itself.
 */
function apiserverFailure(step: Step, machine: ObservedMachine): { reason: string; message: string } | undefined {
  const { view } = step;
  const since = machine.record.apiserverUnhealthySince;
  if (view.spec.kubernetes === undefined || since === undefined || view.now - since < view.spec.remediation.unhealthyAfterMs) return undefined;
  if (machine.infra?.components?.['kube-apiserver']?.healthy === true) return undefined;
  const serving = view.active.some((other) => nameOf(other) !== nameOf(machine) && other.infra?.components?.['kube-apiserver']?.healthy === true);
  if (!serving) {
    step.waits.push({ code: 'NoOtherAPIServer', message: `not replacing ${nameOf(machine)} (kube-apiserver not ready for ${String(view.now - since)} ms): no other apiserver serves`, machine: nameOf(machine) });
    return undefined;
  }
  return { reason: 'APIServerUnhealthy', message: `kube-apiserver not ready since ${String(view.now - since)} ms (unhealthyAfter ${String(view.spec.remediation.unhealthyAfterMs)} ms)` };
}

function learnerFailure(step: Step, machine: ObservedMachine): { reason: string; message: string } | undefined {
  const { infra, record } = machine;
  if (!infra) return undefined;
  if (!infra.memberRunning && infra.memberStartedAt !== undefined) {
    return { reason: 'LearnerExited', message: 'the learner process exited before promotion' };
  }
  // A caught-up learner is waiting for its promotion, not stuck (an idle cluster writes nothing).
  const member = step.view.memberOf(machine);
  if (member && isCaughtUp(step.view, member)) return undefined;
  const lastProgress = record.learnerProgress?.at ?? infra.memberStartedAt;
  if (infra.memberRunning && lastProgress !== undefined && step.view.now - lastProgress >= step.view.spec.remediation.learnerStuckAfterMs) {
    return { reason: 'LearnerStuck', message: `learner made no progress for ${String(step.view.now - lastProgress)} ms` };
  }
  return undefined;
}

export function detectFailures(step: Step): MarkMachineFailed[] {
  const { view } = step;
  const marks: MarkMachineFailed[] = [];
  // Each mark is a remediation, counted as the executor will record it: several failures found in one
  // pass are retries of one sequence, so maxRetry holds within a pass too.
  let last = view.observed.lastRemediation;
  for (const machine of [...step.view.observed.machines].sort(byOrdinal)) {
    if (isGone(step, machine)) continue;
    const failure = failureOf(step, machine);
    if (!failure) continue;
    // Failed provisioning obeys KCP's retry limits like failed health: a provider that always fails
    // would otherwise be asked for replacements forever. A machine the provider lost is replaced at once.
    const gate = failure.reason === 'MachineMissing' ? undefined : remediationGate(step, last);
    if (gate) {
      // The failure itself (for a provider, its last error) is what the user needs to act on.
      const wait: Wait = { ...gate, message: `${gate.message}; ${nameOf(machine)}: ${failure.reason}: ${failure.message}`, machine: nameOf(machine) };
      if (gate.code === 'CannotBeRemediated') step.blocked = wait;
      step.waits.push(wait);
      continue;
    }
    marks.push({ kind: 'MarkMachineFailed', machine: nameOf(machine), ...failure });
    step.failed.add(nameOf(machine));
    last = nextRemediation(last, nameOf(machine), view.now, view.spec.remediation.minHealthyPeriodMs);
  }
  return marks;
}

import { quorum } from '../domain/quorum.ts';
import { componentsCondition, componentsHealthy } from './components.ts';
import type { Condition, ConditionType, Wait } from './types.ts';
import { type ClusterView } from './view.ts';

function condition(type: ConditionType, ok: boolean, reason: string, message: string): Condition {
  return { type, status: ok ? 'True' : 'False', reason, message };
}

/** A condition that is "in progress" (ScalingUp, RollingOut ...): True while it happens, with what holds it. */
function progressing(type: ConditionType, active: boolean, reason: string, waits: Wait[]): Condition {
  if (!active) return { type, status: 'False', reason: `Not${reason}`, message: '' };
  const holding = waits.map((w) => w.message).join('; ');
  return { type, status: 'True', reason, message: holding === '' ? `${reason} in progress` : `${reason} is waiting: ${holding}` };
}

/** Remediating, or why a machine that needs it cannot be remediated any more (maxRetry reached). */
function remediating(active: boolean, waits: Wait[]): Condition {
  const refused = waits.find((w) => w.code === 'CannotBeRemediated');
  if (refused) return { type: 'Remediating', status: 'False', reason: refused.code, message: refused.message };
  return progressing('Remediating', active, 'Remediating', waits);
}

export function conditionsFor(
  view: ClusterView,
  waits: Wait[],
  sets: { failed: Set<string>; leaving: Set<string>; converged: boolean },
): Condition[] {
  const { spec, observed } = view;
  const machines = observed.machines;
  const unhealthyVoters = view.voters.length - view.healthyVoters.length;
  const etcdHealthy = view.membersKnown && unhealthyVoters === 0 && view.voters.length > 0 && observed.alarms.length === 0;
  const etcdMessage = !view.membersKnown
    ? 'member list unavailable'
    : `${String(view.healthyVoters.length)}/${String(view.voters.length)} voters healthy, ${String(view.learners.length)} learners${observed.alarms.length > 0 ? `, alarms: ${observed.alarms.map((a) => a.alarm).join(',')}` : ''}`;
  const ready = machines.filter((m) => {
    const member = view.memberOf(m);
    return member !== undefined && view.isHealthyVoter(member) && componentsHealthy(view, m);
  }).length;
  const machinesReady = ready === spec.replicas && machines.length === spec.replicas;
  // Members a downgrade restarts in place are not replaced, yet not at the spec's version either.
  const outdated = machines.filter((m) => view.isOutdated(m) || (view.downgrade !== undefined && m.record.version !== view.downgrade.target)).length;
  const voterCount = view.voters.length;
  const growing = view.active.length < spec.replicas || voterCount < spec.replicas || view.learners.length > 0;
  const shrinking = outdated === 0 && (voterCount > spec.replicas || machines.length > spec.replicas) && sets.leaving.size > 0;
  const scaleWaits = waits.filter((w) => !w.code.startsWith('Remediation'));
  const components = componentsCondition(view);
  return [
    condition(
      'Available',
      view.membersKnown && view.hasQuorum,
      view.membersKnown && view.hasQuorum ? 'QuorumHealthy' : 'QuorumUnavailable',
      `${String(view.healthyVoters.length)} healthy voters, quorum ${String(quorum(Math.max(voterCount, 1)))}`,
    ),
    condition('EtcdClusterHealthy', etcdHealthy, etcdHealthy ? 'Healthy' : 'NotHealthy', etcdMessage),
    condition('MachinesReady', machinesReady, machinesReady ? 'Ready' : 'NotReady', `${String(ready)}/${String(spec.replicas)} machines are healthy voters${spec.kubernetes === undefined ? '' : ' with every component healthy'}`),
    condition('UpToDate', outdated === 0, outdated === 0 ? 'UpToDate' : 'NotUpToDate', `${String(outdated)} machines not at version ${view.downgrade?.target ?? spec.version}`),
    progressing('ScalingUp', growing && outdated === 0 && !sets.converged, 'ScalingUp', scaleWaits),
    progressing('ScalingDown', shrinking, 'ScalingDown', scaleWaits),
    progressing('RollingOut', outdated > 0, 'RollingOut', scaleWaits),
    remediating(sets.failed.size > 0, waits),
    ...(components === undefined ? [] : [components]),
  ];
}

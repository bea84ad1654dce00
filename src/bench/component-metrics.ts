import type { EventRecord } from '../domain/machine.ts';
import type { ComponentKind, KubernetesComponent } from '../ports/machine-provider.ts';
import type { WatchedComponents } from './component-watcher.ts';
import { seconds } from './stats.ts';

/**
 * A machine's Kubernetes components in a run, in seconds from its start: each start from the loop's
 * own StartComponent event (its message ends with the component), each ready from the component
 * watcher's first healthy answer.
 */
export interface MachineComponentTimes {
  apiserverStartSeconds: number | null;
  apiserverReadySeconds: number | null;
  /** The earlier of the controller-manager's and the scheduler's starts. */
  controllersStartSeconds: number | null;
  /** The later of the two first seen healthy. */
  controllersReadySeconds: number | null;
}

function startedAt(events: EventRecord[], machine: string, component: KubernetesComponent): number | undefined {
  return events.find((e) => e.action === 'StartComponent' && e.outcome === 'Succeeded' && e.machine === machine && e.message.endsWith(`: ${component}`))?.at;
}

const onRunClock = (at: number | undefined, t0: number): number | null => (at === undefined ? null : seconds(at - t0));

/** `pick` of both times, or undefined unless both are known. */
function ofBoth(times: (number | undefined)[], pick: (...values: number[]) => number): number | undefined {
  const known = times.filter((t): t is number => t !== undefined);
  return known.length === times.length ? pick(...known) : undefined;
}

export function machineComponentTimes(machine: string, events: EventRecord[], watched: WatchedComponents, t0: number): MachineComponentTimes {
  const healthy = watched.healthyAt.get(machine) ?? {};
  const controllerStarts = [startedAt(events, machine, 'kube-controller-manager'), startedAt(events, machine, 'kube-scheduler')];
  const controllersReady = [healthy['kube-controller-manager'], healthy['kube-scheduler']];
  return {
    apiserverStartSeconds: onRunClock(startedAt(events, machine, 'kube-apiserver'), t0),
    apiserverReadySeconds: onRunClock(healthy['kube-apiserver'], t0),
    controllersStartSeconds: onRunClock(ofBoth(controllerStarts, Math.min), t0),
    controllersReadySeconds: onRunClock(ofBoth(controllersReady, Math.max), t0),
  };
}

/** Peak resident bytes per component of one machine (etcd included); empty when none was read. */
export function machinePeakRss(machine: string, watched: WatchedComponents): Partial<Record<ComponentKind, number>> {
  return { ...watched.peakRssBytes.get(machine) };
}

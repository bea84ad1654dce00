import { KUBERNETES_COMPONENTS, type KubernetesComponent } from '../ports/machine-provider.ts';
import { activeMachines, byOrdinal, isGone, isReadyVoter, nameOf, type Step } from './step.ts';
import type { ComponentAction, Condition, ObservedComponent, ObservedMachine } from './types.ts';
import type { ClusterView } from './view.ts';

/**
 * A Kubernetes control plane's components, as kubeadm's stacked topology joins a machine: its etcd
 * member first (learner, then voter), then kube-apiserver on it; once that answers /readyz, the
 * endpoint routes to it, and only then kube-controller-manager and kube-scheduler start, which talk to
 * their own machine's apiserver. A machine leaves in the opposite order, as KCP lets one go: out of
 * the endpoint, its components stopped, and only then its member removed (removal.ts asks
 * `drainWait`). Every step is a machine action: none changes the membership, so they run beside the
 * next learner's join.
 */

const componentOf = (machine: ObservedMachine, component: KubernetesComponent): ObservedComponent | undefined => machine.infra?.components?.[component];

const runs = (machine: ObservedMachine, component: KubernetesComponent): boolean => componentOf(machine, component)?.running === true;

const healthy = (machine: ObservedMachine, component: KubernetesComponent): boolean => componentOf(machine, component)?.healthy === true;

/** The machines the endpoint routes to now (whether or not they pass its check); none when it does not run. */
function routed(step: Step): Set<string> {
  return new Set((step.view.observed.endpoint?.routes ?? []).map((route) => route.machine));
}

/** The machines whose apiserver the endpoint should route to: staying, and ready. */
function wantedRoutes(step: Step): string[] {
  return activeMachines(step)
    .filter((m) => healthy(m, 'kube-apiserver'))
    .sort(byOrdinal)
    .map(nameOf);
}

const minorOf = (version: string | undefined): number => Number(version?.split('.')[1] ?? Number.NaN);

/**
 * Machines whose apiserver runs a lower Kubernetes minor than `machine`'s. Kubernetes' version skew
 * policy lets a controller-manager or scheduler be at most as new as the apiservers it talks to: during
 * a rollout a new machine's ones wait until the old apiservers are gone.
 */
function olderApiservers(step: Step, machine: ObservedMachine): string[] {
  const own = minorOf(machine.record.kubernetesVersion);
  return step.view.observed.machines.filter((other) => runs(other, 'kube-apiserver') && minorOf(other.record.kubernetesVersion) < own).map((other) => `${nameOf(other)} at ${other.record.kubernetesVersion ?? ''}`);
}

/** Start, route and stop the Kubernetes components; nothing on an etcd-only control plane. */
export function componentActions(step: Step): ComponentAction[] {
  const { view } = step;
  if (view.spec.kubernetes === undefined) return [];
  const actions: ComponentAction[] = [];
  const inEndpoint = routed(step);
  for (const machine of activeMachines(step)) {
    if (machine.infra?.state !== 'Provisioned') continue;
    const name = nameOf(machine);
    if (!runs(machine, 'kube-apiserver')) {
      // Promoted and healthy: its apiserver reads and writes through its own member, which must vote.
      if (isReadyVoter(view, machine)) actions.push({ kind: 'StartComponent', machine: name, component: 'kube-apiserver', reason: 'JoinControlPlane' });
      continue;
    }
    if (!healthy(machine, 'kube-apiserver') || !inEndpoint.has(name)) continue;
    const older = olderApiservers(step, machine);
    if (older.length > 0) {
      step.waits.push({ code: 'VersionSkew', message: `${name} starts its controller-manager and scheduler (Kubernetes ${machine.record.kubernetesVersion ?? ''}) once no older apiserver runs: ${older.join(', ')}`, machine: name });
      continue;
    }
    for (const component of ['kube-controller-manager', 'kube-scheduler'] as const) {
      if (!runs(machine, component)) actions.push({ kind: 'StartComponent', machine: name, component, reason: 'JoinControlPlane' });
    }
  }
  const wanted = wantedRoutes(step);
  const endpoint = view.observed.endpoint;
  const differs = endpoint !== undefined && (endpoint.routes === undefined ? wanted.length > 0 : wanted.length !== inEndpoint.size || wanted.some((m) => !inEndpoint.has(m)));
  if (differs) actions.push({ kind: 'RouteEndpoint', machines: wanted, reason: 'EndpointOutOfDate' });
  for (const machine of view.observed.machines) {
    if (!isGone(step, machine) || inEndpoint.has(nameOf(machine))) continue;
    if (KUBERNETES_COMPONENTS.some((component) => runs(machine, component))) actions.push({ kind: 'StopComponents', machine: nameOf(machine), reason: 'Draining' });
  }
  return actions;
}

/**
 * Why a leaving machine's member may not be removed yet: the endpoint still routes to it, or one of its
 * components still runs (it would serve from a member that is no longer one). Undefined: drained.
 */
export function drainWait(step: Step, machine: ObservedMachine): string | undefined {
  if (step.view.spec.kubernetes === undefined) return undefined;
  const name = nameOf(machine);
  if (routed(step).has(name)) return `the endpoint still routes to ${name}`;
  const running = KUBERNETES_COMPONENTS.filter((component) => runs(machine, component));
  return running.length > 0 ? `${name} still runs ${running.join(', ')}` : undefined;
}

/** What keeps a Kubernetes control plane from being ready: each machine's components not healthy, the endpoint not routing to every one. */
export function componentsNotReady(step: Step): string[] {
  const { view } = step;
  if (view.spec.kubernetes === undefined) return [];
  const problems: string[] = [];
  for (const machine of activeMachines(step)) {
    const down = KUBERNETES_COMPONENTS.filter((component) => !healthy(machine, component));
    if (down.length > 0) problems.push(`${nameOf(machine)}: ${down.map((component) => `${component} ${componentOf(machine, component)?.reason ?? 'not running'}`).join('; ')}`);
  }
  const routes = view.observed.endpoint?.routes;
  if (routes === undefined) problems.push('the endpoint is not running');
  else {
    const up = new Set(routes.filter((route) => route.up).map((route) => route.machine));
    const missing = activeMachines(step).map(nameOf).filter((name) => !up.has(name));
    if (missing.length > 0) problems.push(`the endpoint does not route to ${missing.join(', ')} yet`);
  }
  return problems;
}

/** Every Kubernetes component of the machine answers healthy; true on an etcd-only control plane. */
export function componentsHealthy(view: ClusterView, machine: ObservedMachine): boolean {
  return view.spec.kubernetes === undefined || KUBERNETES_COMPONENTS.every((component) => healthy(machine, component));
}

/**
 * ControlPlaneComponentsHealthy (KCP v1beta2's name): every staying machine's apiserver, controller-manager
 * and scheduler answer healthy. Undefined on an etcd-only control plane.
 */
export function componentsCondition(view: ClusterView): Condition | undefined {
  if (view.spec.kubernetes === undefined) return undefined;
  const unhealthy = view.active.flatMap((machine) => {
    const down = KUBERNETES_COMPONENTS.filter((component) => !healthy(machine, component));
    return down.length === 0 ? [] : [`${nameOf(machine)}: ${down.join(', ')}`];
  });
  if (unhealthy.length === 0) return { type: 'ControlPlaneComponentsHealthy', status: 'True', reason: 'Healthy', message: '' };
  return { type: 'ControlPlaneComponentsHealthy', status: 'False', reason: 'NotHealthy', message: `not healthy: ${unhealthy.join('; ')}` };
}

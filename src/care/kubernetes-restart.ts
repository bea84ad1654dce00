import { NOT_STARTED, type RollingProgress } from '../domain/care-job.ts';
import type { LeaseGuard } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { ComponentHealth, KubernetesComponent, KubernetesLaunch, KubernetesMachines } from '../ports/machine-provider.ts';
import { done, proceed, requeueAfter, runSteps, type StepResult } from './steps.ts';

/**
 * A rolling restart of a Kubernetes control plane's components, one machine at a time, so that the
 * endpoint always has a ready apiserver: a machine is taken out of the endpoint and restarted only
 * while every other machine's apiserver is ready, and the next waits until its apiserver is ready and
 * back in the endpoint and its controller-manager and scheduler are healthy. Components load their
 * certificates (and the etcd CA bundle) only when they start, so this is how renewed files and a
 * rotated etcd CA reach them.
 */

/** A Kubernetes control plane as its care needs it. */
export interface KubernetesCare {
  machines: KubernetesMachines;
  /** The machines running components, in ordinal order (the endpoint's order). */
  names: readonly string[];
  /** How a machine's components start: its recorded Kubernetes version. */
  launch: (machine: string) => KubernetesLaunch;
}

const POLL_MS = 500;
const LATER_COMPONENTS = ['kube-controller-manager', 'kube-scheduler'] as const;

type Health = Record<KubernetesComponent, ComponentHealth>;

async function healthOf(cluster: string, care: KubernetesCare): Promise<Map<string, Health>> {
  const all = await Promise.all(care.names.map(async (name) => [name, await care.machines.componentHealth(cluster, name)] as const));
  return new Map(all);
}

const notReady = (health: Health | undefined): boolean => health?.['kube-apiserver'].healthy !== true;
const why = (health: ComponentHealth | undefined): string => health?.reason ?? 'not running';

/** RequeueAfter APIServerNotReady naming a machine (other than `except`) whose apiserver is not ready; undefined when all are. */
function apiserverGate(health: Map<string, Health>, except?: string): StepResult | undefined {
  const [waiting] = [...health].filter(([name, h]) => name !== except && notReady(h));
  if (waiting === undefined) return undefined;
  const [name, h] = waiting;
  return requeueAfter(POLL_MS, 'APIServerNotReady', `the apiserver of ${name} is not ready (${why(h['kube-apiserver'])})`);
}

/** The gate an etcd member's restart waits at on a Kubernetes control plane: its apiserver serves through that member. */
export async function apiserversReady(cluster: string, care: KubernetesCare): Promise<StepResult | undefined> {
  return apiserverGate(await healthOf(cluster, care));
}

/**
 * The endpoint routed to every machine but `leaving`, before something takes its apiserver out of
 * service (its etcd member's restart): new connections go to the others, which the gate found ready.
 */
export async function drainEndpoint(cluster: string, care: KubernetesCare, leaving: string): Promise<void> {
  await care.machines.route(
    cluster,
    care.names.filter((n) => n !== leaving),
  );
}

/** The endpoint routed to exactly the machines whose apiserver is ready, in ordinal order (as the planner routes). */
async function routeReady(cluster: string, care: KubernetesCare, health: Map<string, Health>): Promise<void> {
  await care.machines.route(
    cluster,
    care.names.filter((name) => !notReady(health.get(name))),
  );
}

/**
 * One step: one machine taken out of the endpoint, its components stopped, `between` run (its new
 * certificate), its apiserver started; or one look whether the machine restarted last is back (then it
 * is routed to again and its controller-manager and scheduler started). Never sleeps: what it waits
 * for comes back as RequeueAfter with its reason.
 */
export async function kubernetesRestartStep(
  cluster: string,
  care: KubernetesCare,
  lease: LeaseGuard,
  progress: RollingProgress,
  between: (machine: string) => Promise<void>,
): Promise<{ result: StepResult; progress: RollingProgress }> {
  const health = await healthOf(cluster, care);
  const name = progress.awaiting;
  if (name !== undefined) {
    const own = health.get(name);
    if (notReady(own)) return { result: requeueAfter(POLL_MS, 'APIServerNotReady', `the apiserver of ${name} is not ready yet (${why(own?.['kube-apiserver'])})`), progress };
    await lease.verify();
    await routeReady(cluster, care, health);
    // Idempotent: a component that runs is left running, so a repeated step starts nothing twice.
    for (const component of LATER_COMPONENTS) await care.machines.startComponent(cluster, name, component, care.launch(name), lease.fence);
    const down = LATER_COMPONENTS.filter((component) => own?.[component].healthy !== true);
    if (down.length > 0) return { result: requeueAfter(POLL_MS, 'ComponentsNotHealthy', `${name}: ${down.map((c) => `${c} ${why(own?.[c])}`).join('; ')}`), progress };
    return { result: proceed(`${name}'s components are back and serve`), progress: { started: true, done: [...progress.done, name] } };
  }
  const next = care.names.find((n) => !progress.done.includes(n));
  if (next === undefined) return { result: done(`restarted the Kubernetes components of ${String(progress.done.length)} machines`), progress };
  const gate = apiserverGate(health, next);
  if (gate !== undefined) return { result: gate, progress };
  await lease.verify();
  await drainEndpoint(cluster, care, next);
  await care.machines.stopComponents(cluster, next, lease.fence);
  await between(next);
  await care.machines.startComponent(cluster, next, 'kube-apiserver', care.launch(next), lease.fence);
  return { result: proceed(`restarted the apiserver of ${next}`), progress: { started: true, done: progress.done, awaiting: next } };
}

/**
 * A whole rolling restart of the components (what a CA rotation's phase needs: the CA files and client
 * certificates are already in the store), `between` run while a machine's are stopped (its new serving
 * certificate; by default nothing), its steps driven to the end, each wait within `patienceMs`.
 */
export async function restartKubernetes(
  cluster: string,
  care: KubernetesCare,
  options: { lease: LeaseGuard; clock: Clock; patienceMs: number; onNote: (text: string) => void; between?: ((machine: string) => Promise<void>) | undefined },
): Promise<void> {
  let progress = NOT_STARTED;
  const between = options.between ?? ((): Promise<void> => Promise.resolve());
  await runSteps(
    async () => {
      const next = await kubernetesRestartStep(cluster, care, options.lease, progress, between);
      progress = next.progress;
      return next.result;
    },
    options.clock,
    options.patienceMs,
    options.onNote,
  );
}

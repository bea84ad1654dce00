import { hostname } from 'node:os';
import type { KubernetesControlPlaneObjects as KubernetesObjects, ObjectResource } from '../../adapters/kubernetes/control-plane-objects.ts';
import { parseDuration } from '../../api/duration.ts';
import { InvalidInputError } from '../../api/errors.ts';
import { KCP_GROUP, KCP_KIND, KCP_PLURAL, KCP_VERSION } from '../../api/kcp/kubeadm-control-plane.ts';
import { CONTROLLER_ACCOUNT, CONTROLLER_NAMESPACE, KCP_PERMISSIONS } from '../../api/rbac.ts';
import { Controller } from '../../controller/controller.ts';
import { kubeadmControlPlaneKind } from '../../controller/kcp-objects.ts';
import { ObjectSync } from '../../controller/object-sync.ts';
import { serveEndpoints } from '../../controller/http-endpoints.ts';
import { PrometheusMetrics } from '../../controller/prometheus-metrics.ts';
import { systemTimers } from '../../controller/timers.ts';
import { systemClock } from '../../ports/clock.ts';
import { ForbiddenError } from '../../ports/control-plane-objects.ts';
import { leaseCallBoundMs } from '../../lease/lease-keeper.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';

export interface ControllerFlags {
  metricsAddress: string;
  id?: string;
  maxConcurrentReconciles: string;
  kubeconfig?: string;
  namespace?: string;
  relistEvery: string;
  kubeadmControlPlanes?: boolean;
}

/** After SIGTERM the process exits within this, whatever the store does (Kubernetes gives a pod 30 s). */
export const SHUTDOWN_DEADLINE_MS = 10_000;
/** Passes in flight get this long to end after SIGTERM (their calls are bounded by the lease's call bound). */
const PASSES_BOUND_MS = 7_000;
/** Then releasing the leases and the registration gets this long ... */
const RELEASE_BOUND_MS = 2_000;
/** ... and what is left of the deadline is for closing the store's client; at the deadline the process exits regardless. */
const EXIT_MARGIN_MS = 500;

export function parseMetricsAddress(text: string): { host: string; port: number } {
  const match = /^(\[[^\]]+\]|[^:\s]+):(\d{1,5})$/.exec(text);
  const port = match ? Number(match[2]) : Number.NaN;
  if (!match?.[1] || !(port >= 0 && port <= 65_535)) throw new InvalidInputError([`--metrics-address: must be HOST:PORT, such as 127.0.0.1:9464, got ${text}`]);
  return { host: match[1].replace(/^\[|\]$/g, ''), port };
}

export function parseMaxConcurrent(text: string): number {
  const n = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!(n >= 1 && n <= 10_000)) throw new InvalidInputError([`--max-concurrent-reconciles: must be a whole number from 1 to 10000, got ${text}`]);
  return n;
}

export function parseId(text: string | undefined): string {
  if (text === undefined) return `${hostname()}:${String(process.pid)}`;
  if (!/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,252}$/.test(text)) throw new InvalidInputError([`--id: must be letters, digits and . _ : @ - (at most 253), got ${JSON.stringify(text)}`]);
  return text;
}

/**
 * With --kubeconfig: the ControlPlane objects of the management cluster (and with
 * --kubeadm-control-planes its KubeadmControlPlanes too), checked first for every permission the
 * controller needs (a missing one is one clear line, not a failure mid-pass).
 */
async function managementObjects(ctx: CliContext, flags: ControllerFlags, id: string, onForbidden: (error: ForbiddenError) => void): Promise<ObjectSync[]> {
  if (flags.kubeconfig === undefined) {
    if (flags.namespace !== undefined) throw new InvalidInputError(['--namespace: needs --kubeconfig (the management cluster whose objects to reconcile)']);
    if (flags.kubeadmControlPlanes === true) throw new InvalidInputError(['--kubeadm-control-planes: needs --kubeconfig (the management cluster whose objects to reconcile)']);
    return [];
  }
  const kubeconfigFile = flags.kubeconfig;
  const relistEveryMs = parseDuration(flags.relistEvery);
  if (relistEveryMs === undefined || relistEveryMs < 1_000) throw new InvalidInputError([`--relist-every: must be a duration of 1s or more, such as 60s, got ${flags.relistEvery}`]);
  const { KubernetesControlPlaneObjects } = await import('../../adapters/kubernetes/control-plane-objects.ts');
  const open = async (resource?: ObjectResource): Promise<KubernetesObjects> => {
    let objects;
    try {
      objects = new KubernetesControlPlaneObjects({ kubeconfigFile, namespace: flags.namespace, instance: id, relistEveryMs, resource });
    } catch (error) {
      throw new InvalidInputError([`--kubeconfig: cannot load ${kubeconfigFile}: ${error instanceof Error ? error.message : String(error)}`]);
    }
    let missing;
    try {
      missing = await objects.missingPermissions();
    } catch (error) {
      throw new InvalidInputError([`--kubeconfig: the API server ${objects.server} did not answer: ${error instanceof Error ? error.message : String(error)}`]);
    }
    if (missing.length > 0) {
      throw new ForbiddenError(`forbidden: the controller may not ${missing.join(', ')} on ${objects.server}; fastplane install --kubeconfig FILE grants these to the ServiceAccount ${CONTROLLER_NAMESPACE}/${CONTROLLER_ACCOUNT}`);
    }
    return objects;
  };
  // Names are one namespace in the store, whatever kind of object asked for them.
  const owners = new Map<string, string>();
  const syncs = [new ObjectSync({ runtime: ctx, objects: await open(), clock: systemClock, timers: systemTimers, onForbidden, owners })];
  if (flags.kubeadmControlPlanes === true) {
    const [{ listEtcdVersions }, { listKubernetesVersions }] = await Promise.all([import('../../adapters/etcd/etcd-binaries.ts'), import('../../adapters/kubernetes/kubernetes-binaries.ts')]);
    const objects = await open({ group: KCP_GROUP, version: KCP_VERSION, plural: KCP_PLURAL, kind: KCP_KIND, permissions: KCP_PERMISSIONS });
    syncs.push(new ObjectSync({ runtime: ctx, objects, clock: systemClock, timers: systemTimers, onForbidden, owners, kind: kubeadmControlPlaneKind(listEtcdVersions, listKubernetesVersions) }));
  }
  return syncs;
}

/** Resolves on the first SIGTERM or SIGINT, with its name. */
function nextStopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    const on = (signal: NodeJS.Signals): void => {
      process.off('SIGTERM', on);
      process.off('SIGINT', on);
      resolve(signal);
    };
    process.on('SIGTERM', on);
    process.on('SIGINT', on);
  });
}

/**
 * `fastplane controller`: reconciles every control plane of the store until SIGTERM or SIGINT, then
 * stops taking work, lets passes in flight end, releases every lease and exits 0; 1 when the store did
 * not answer in time (the leases then expire after their TTL). Either way within SHUTDOWN_DEADLINE_MS.
 */
export async function controllerCommand(ctx: CliContext, flags: ControllerFlags): Promise<number> {
  const { host, port } = parseMetricsAddress(flags.metricsAddress);
  const maxConcurrentReconciles = parseMaxConcurrent(flags.maxConcurrentReconciles);
  const id = parseId(flags.id);
  const stop = nextStopSignal();
  let forbidden: ForbiddenError | undefined;
  let onForbidden: (error: ForbiddenError) => void = () => undefined;
  const refused = new Promise<'forbidden'>((resolve) => {
    onForbidden = (error) => {
      forbidden ??= error;
      resolve('forbidden');
    };
  });
  const syncs = await managementObjects(ctx, flags, id, (error) => {
    onForbidden(error);
  });
  const metrics = new PrometheusMetrics();
  const controller = new Controller({
    store: ctx.store,
    id,
    clock: systemClock,
    timers: systemTimers,
    maxConcurrentReconciles,
    leaseTtlMs: ctx.leaseTtlMs,
    identity: ctx.identity,
    // ctx's etcd clients time out at this bound, so the renew deadline covers whole calls.
    callBoundMs: leaseCallBoundMs(ctx.leaseTtlMs),
    log: ctx.log,
    metrics,
    // Each recorded event also becomes an Event on the cluster's object, if it has one.
    depsFor: async (manifest, writer, notify) =>
      ctx.passDeps(await ctx.clusterPorts(manifest), (event) => {
        notify(event);
        for (const sync of syncs) sync.onEvent(event);
      })(writer),
  });
  let server;
  try {
    server = await serveEndpoints(host, port, { registry: metrics.registry, readiness: () => controller.readiness() });
  } catch (error) {
    throw new InvalidInputError([`--metrics-address: cannot listen on ${flags.metricsAddress}: ${error instanceof Error ? error.message : String(error)}`]);
  }
  await controller.start();
  for (const sync of syncs) sync.start();
  const kinds = flags.kubeadmControlPlanes === true ? 'ControlPlane and annotated KubeadmControlPlane objects' : 'ControlPlane objects';
  ctx.log.info({ id, metricsAddress: flags.metricsAddress, maxConcurrentReconciles, leaseTtlMs: ctx.leaseTtlMs, kubeconfig: flags.kubeconfig }, `controller ${id} started${syncs.length > 0 ? ` with the ${kinds} of ${flags.namespace === undefined ? 'every namespace' : `namespace ${flags.namespace}`}` : ''}; metrics on http://${flags.metricsAddress}/metrics`);
  const signal = await Promise.race([stop, refused]);
  if (forbidden) {
    process.stderr.write(`error: ${forbidden.message}\n`);
    ctx.log.error({ id, err: forbidden.message }, `controller ${id} stopping: ${forbidden.message}`);
  } else ctx.log.info({ id, signal }, `controller ${id} stopping (${signal}): no new work, passes in flight end, leases released`);
  let code: number = EXIT.internal;
  // Closing the store's client (after this returns) is a call to the store too, and calls in flight
  // may keep the process alive: at the deadline it ends regardless. Logs are written synchronously.
  setTimeout(() => {
    ctx.log.warn({ id, deadlineMs: SHUTDOWN_DEADLINE_MS }, `controller ${id}: shutdown deadline (${String(SHUTDOWN_DEADLINE_MS)} ms) reached; exiting`);
    process.exit(code);
  }, SHUTDOWN_DEADLINE_MS - EXIT_MARGIN_MS).unref();
  const [released] = await Promise.all([controller.stop(PASSES_BOUND_MS, RELEASE_BOUND_MS), ...syncs.map((sync) => sync.stop(PASSES_BOUND_MS))]);
  await new Promise<void>((resolve) => {
    server.close(() => {
      resolve();
    });
    server.closeAllConnections();
  });
  ctx.log.info({ id, released }, released ? `controller ${id} stopped` : `controller ${id} stopped; the store did not answer, so its leases expire after their TTL`);
  code = released && !forbidden ? EXIT.converged : EXIT.internal;
  return code;
}

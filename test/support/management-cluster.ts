import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import type { CliEnv } from './cli.ts';
import { kubectlFor, TEST_KUBERNETES, type Kubectl } from './kubectl.ts';
import { TcpProxy } from './tcp-proxy.ts';

/**
 * A management cluster brought up by fastplane itself (`up mgmt --replicas 1 --kubernetes`), with
 * `fastplane install` applied, and a TCP proxy in front of its API server so a test can cut the
 * connections of the controllers it points at the proxy.
 */
export interface ManagementCluster {
  /** kubectl as the cluster's admin, straight to the endpoint (never through the proxy). */
  admin: Kubectl;
  proxy: TcpProxy;
}

/** A ControlPlane object as `kubectl get fcp NAME -o json` prints the fields the tests read. */
export interface ObjectJson {
  metadata: { generation: number; finalizers?: string[] };
  status?: {
    observedGeneration?: number;
    replicas?: number;
    readyReplicas?: number;
    voters?: number;
    conditions?: { type: string; status: string; reason?: string; message?: string; observedGeneration?: number }[];
  };
}

/** An events.k8s.io/v1 Event, the fields the tests read. */
export interface EventJson {
  reason: string;
  note: string;
  reportingController: string;
  regarding: { name: string };
}

/** `up mgmt` (one machine, Kubernetes), `install`, and the proxy listening in front of its API server. */
export async function startManagementCluster(env: CliEnv): Promise<ManagementCluster> {
  const up = await env.run(['up', '--name', 'mgmt', '--replicas', '1', '--kubernetes', TEST_KUBERNETES, '--timeout', '150s']);
  assert.equal(up.code, 0, up.stderr);
  const admin = await kubectlFor(env, 'mgmt');
  const install = await env.run(['install', '--kubeconfig', admin.kubeconfig]);
  assert.equal(install.code, 0, install.stderr);
  assert.match(install.stdout, /serviceaccount\/fastplane-controller created/);
  assert.match(install.stdout, /clusterrole\.rbac\.authorization\.k8s\.io\/fastplane-controller created/);
  const server = new URL((parse(readFileSync(admin.kubeconfig, 'utf8')) as { clusters: { cluster: { server: string } }[] }).clusters[0]?.cluster.server ?? '');
  const proxy = new TcpProxy(server.hostname, { host: server.hostname, port: Number(server.port) });
  await proxy.listen();
  return { admin, proxy };
}

/** A kubeconfig for a ServiceAccount's token, through the proxy, so the test can cut its connections. */
export async function accountKubeconfig(env: CliEnv, mgmt: ManagementCluster, account: string, namespace: string, file: string): Promise<string> {
  const token = (await mgmt.admin.run(['create', 'token', account, '-n', namespace, '--duration', '1h'])).trim();
  const config = parse(readFileSync(mgmt.admin.kubeconfig, 'utf8')) as { clusters: { cluster: { server: string } }[]; users: { user: unknown }[] };
  const cluster = config.clusters[0];
  const user = config.users[0];
  assert.ok(cluster && user);
  cluster.cluster.server = `https://${mgmt.proxy.host}:${String(mgmt.proxy.port)}`;
  user.user = { token };
  const path = join(env.stateDir, file);
  writeFileSync(path, stringify(config), { mode: 0o600 });
  return path;
}

/** Applies an object (or several) given as data through kubectl. */
export async function applyObjects(env: CliEnv, admin: Kubectl, name: string, objects: readonly Record<string, unknown>[]): Promise<void> {
  const file = join(env.stateDir, `${name}.yaml`);
  writeFileSync(file, objects.map((object) => stringify(object)).join('---\n'));
  await admin.run(['apply', '-f', file]);
}

/** The Events the controller recorded regarding the object `name` in namespace default. */
export async function controllerEvents(admin: Kubectl, name: string): Promise<EventJson[]> {
  const { items } = await admin.json<{ items: EventJson[] }>(['get', 'events.events.k8s.io', '-n', 'default']);
  return items.filter((e) => e.regarding.name === name && e.reportingController === 'fastplane.dev/controller');
}

/**
 * Polls `probe` every 500 ms until it gives a value; a probe that throws (kubectl while the API server
 * restarts) is tried again. Fails with the last error after `timeoutMs`.
 */
export async function eventually<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 90_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  throw new Error(`timed out waiting for ${what}${last instanceof Error ? `: ${last.message}` : ''}`);
}

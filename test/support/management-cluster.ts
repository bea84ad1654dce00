import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import type { CliEnv, CliRun } from './cli.ts';
import { kubectlFor, type Kubectl, TEST_KUBERNETES } from './kubectl.ts';
import { TcpProxy } from './tcp-proxy.ts';

/**
 * A management cluster brought up by fastplane itself (one machine running Kubernetes), with
 * `fastplane install` applied, and a proxy in front of its API server so a test can cut the
 * controller's connections.
 */
export interface ManagementCluster {
  admin: Kubectl;
  proxy: TcpProxy;
  install: CliRun;
  /** A kubeconfig for a ServiceAccount's token, through the proxy. */
  accountKubeconfig(account: string, namespace: string, file: string): Promise<string>;
}

/** An events.k8s.io/v1 Event, the fields the tests read. */
export interface ControllerEvent {
  reason: string;
  note: string;
  reportingController: string;
  regarding: { name: string; kind: string };
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

/** Polls `probe` until it gives a value, taking a failed probe (a kubectl call refused) as not yet. */
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

/** `fastplane up mgmt` (1 machine, Kubernetes), then `fastplane install --kubeconfig` with `installArgs`. */
export async function managementCluster(env: CliEnv, installArgs: readonly string[] = []): Promise<ManagementCluster> {
  const up = await env.run(['up', '--name', 'mgmt', '--replicas', '1', '--kubernetes', TEST_KUBERNETES, '--timeout', '150s']);
  assert.equal(up.code, 0, up.stderr);
  const admin = await kubectlFor(env, 'mgmt');
  const install = await env.run(['install', '--kubeconfig', admin.kubeconfig, ...installArgs]);
  assert.equal(install.code, 0, install.stderr);
  const config = parse(readFileSync(admin.kubeconfig, 'utf8')) as { clusters: { cluster: { server: string } }[]; users: { user: unknown }[] };
  const server = new URL(config.clusters[0]?.cluster.server ?? '');
  const proxy = new TcpProxy(server.hostname, { host: server.hostname, port: Number(server.port) });
  await proxy.listen();
  const accountKubeconfig = async (account: string, namespace: string, file: string): Promise<string> => {
    const token = (await admin.run(['create', 'token', account, '-n', namespace, '--duration', '1h'])).trim();
    const copy = structuredClone(config);
    const cluster = copy.clusters[0];
    const user = copy.users[0];
    assert.ok(cluster && user);
    cluster.cluster.server = `https://${proxy.host}:${String(proxy.port)}`;
    user.user = { token };
    const path = join(env.stateDir, file);
    writeFileSync(path, stringify(copy), { mode: 0o600 });
    return path;
  };
  return { admin, proxy, install, accountKubeconfig };
}

/** The events.k8s.io Events fastplane's controller wrote about the object `name`. */
export async function controllerEvents(admin: Kubectl, name: string, namespace = 'default'): Promise<ControllerEvent[]> {
  const { items } = await admin.json<{ items: ControllerEvent[] }>(['get', 'events.events.k8s.io', '-n', namespace]);
  return items.filter((e) => e.regarding.name === name && e.reportingController === 'fastplane.dev/controller');
}

/** Applies objects given as data through kubectl. */
export async function applyObjects(env: CliEnv, admin: Kubectl, name: string, objects: readonly Record<string, unknown>[]): Promise<void> {
  const file = join(env.stateDir, `${name}.yaml`);
  writeFileSync(file, objects.map((object) => stringify(object)).join('---\n'));
  await admin.run(['apply', '-f', file]);
}

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { request, type RequestOptions } from 'node:https';
import { setTimeout as sleep } from 'node:timers/promises';
import { createSecureContext, type SecureContext } from 'node:tls';
import { join } from 'node:path';
import { KUBERNETES_PORTS } from '../../src/adapters/host/kubernetes-flags.ts';
import { compareVersions } from '../../src/api/versions.ts';
import type { CliEnv } from './cli.ts';

/** What each running component of a cluster reported at one moment: versions by machine address. */
export interface VersionSample {
  at: number;
  apiservers: Map<string, string>;
  controllerManagers: Map<string, string>;
  schedulers: Map<string, string>;
}

interface ClientCertificate {
  cert: Buffer;
  key: Buffer;
}

/** The client certificate of a kubeconfig `fastplane kubeconfig` printed (embedded data). */
export function clientCertificateOf(kubeconfigText: string): ClientCertificate {
  const field = (name: string): Buffer => {
    const match = new RegExp(`${name}: (\\S+)`).exec(kubeconfigText);
    if (!match?.[1]) throw new Error(`kubeconfig has no ${name}`);
    return Buffer.from(match[1], 'base64');
  };
  return { cert: field('client-certificate-data'), key: field('client-key-data') };
}

/** TLS contexts by client (none: anonymous), built once: a sampler asks every component several times a second. */
const contexts = new Map<ClientCertificate | undefined, SecureContext>();

function contextOf(client: ClientCertificate | undefined): SecureContext {
  let context = contexts.get(client);
  if (context === undefined) {
    context = createSecureContext(client ?? {});
    contexts.set(client, context);
  }
  return context;
}

/** GET over HTTPS, any serving certificate (the version is what is read, not who serves it); undefined when nothing answers. */
function get(host: string, port: number, path: string, client: ClientCertificate | undefined): Promise<string | undefined> {
  // tls.connect takes the context; node's types list it only among tls.connect's options.
  const options: RequestOptions & { secureContext: SecureContext } = { host, port, path, method: 'GET', rejectUnauthorized: false, timeout: 2000, secureContext: contextOf(client) };
  return new Promise((resolve) => {
    const req = request(options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => { resolve(res.statusCode === 200 ? body : undefined); });
    });
    req.on('timeout', () => req.destroy());
    req.on('error', () => { resolve(undefined); });
    req.end();
  });
}

/** The apiserver's own `/version` (public to anyone, as the system:public-info-viewer role has it). */
async function apiserverVersion(address: string): Promise<string | undefined> {
  const body = await get(address, KUBERNETES_PORTS['kube-apiserver'], '/version', undefined);
  return body === undefined ? undefined : (JSON.parse(body) as { gitVersion: string }).gitVersion.replace(/^v/, '');
}

/**
 * The version a controller-manager or scheduler reports in its `kubernetes_build_info` metric: neither
 * serves `/version` on its secure port, and `/metrics` needs a client the apiserver authorizes.
 */
async function metricsVersion(address: string, port: number, client: ClientCertificate): Promise<string | undefined> {
  const body = await get(address, port, '/metrics', client);
  return body === undefined ? undefined : /^kubernetes_build_info\{.*git_version="v([^"]+)"/m.exec(body)?.[1];
}

/** The addresses of the cluster's machines on this host, from the local provider's machine files. */
export function localMachineAddresses(env: CliEnv, cluster: string): string[] {
  const dir = join(env.stateDir, 'clusters', cluster, 'machines');
  return readdirSync(dir).flatMap((name) => {
    try {
      return [(JSON.parse(readFileSync(join(dir, name, 'machine.json'), 'utf8')) as { address: string }).address];
    } catch {
      return [];
    }
  });
}

/**
 * One sample of every component's version on the machines at `addresses` (one that serves nothing is left out). Controller-managers and schedulers are read before the
 * apiservers: a newer one read first still runs when an older apiserver answers after it, so a skew
 * seen in a sample existed at the moment of the later read.
 */
export async function sampleVersions(addresses: readonly string[], client: ClientCertificate): Promise<VersionSample> {
  const read = async (reader: (address: string) => Promise<string | undefined>): Promise<Map<string, string>> => {
    const versions = await Promise.all(addresses.map(async (address) => [address, await reader(address)] as const));
    return new Map(versions.flatMap(([address, version]) => (version === undefined ? [] : [[address, version] as const])));
  };
  const controllerManagers = await read((a) => metricsVersion(a, KUBERNETES_PORTS['kube-controller-manager'], client));
  const schedulers = await read((a) => metricsVersion(a, KUBERNETES_PORTS['kube-scheduler'], client));
  const apiservers = await read(apiserverVersion);
  return { at: Date.now(), apiservers, controllerManagers, schedulers };
}

/**
 * Samples every component's version on the machines at `addresses()` one after another, a pause of
 * `everyMs` between samples, until `stop` resolves with them all.
 */
export function sampleVersionsUntilStopped(addresses: () => readonly string[], client: ClientCertificate, everyMs: number): { stop: () => Promise<VersionSample[]> } {
  const samples: VersionSample[] = [];
  const sampling = { on: true };
  const loop = (async () => {
    while (sampling.on) {
      samples.push(await sampleVersions(addresses(), client));
      await sleep(everyMs);
    }
  })();
  return {
    stop: async () => {
      sampling.on = false;
      await loop;
      return samples;
    },
  };
}

const minor = (version: string): number => Number(version.split('.')[1]);

/** The version skew policy's breaches in a sample: apiservers more than one minor apart, or a controller-manager or scheduler newer than the oldest apiserver. */
export function skewBreaches(sample: VersionSample): string[] {
  const apiservers = [...sample.apiservers.values()];
  if (apiservers.length === 0) return [];
  const oldest = apiservers.reduce((a, b) => (compareVersions(a, b) <= 0 ? a : b));
  const newest = apiservers.reduce((a, b) => (compareVersions(a, b) >= 0 ? a : b));
  const breaches = minor(newest) - minor(oldest) > 1 ? [`apiservers at ${oldest} and ${newest}`] : [];
  for (const [kind, versions] of [['controller-manager', sample.controllerManagers], ['scheduler', sample.schedulers]] as const) {
    for (const [address, version] of versions) {
      if (minor(version) > minor(oldest)) breaches.push(`${kind} on ${address} at ${version} while an apiserver runs ${oldest}`);
    }
  }
  return breaches;
}

/**
 * A rollout to `next` judged from its samples: both versions' apiservers seen at once (the check had
 * something to judge), no sample breaking the skew policy, every component at `next` in the last one.
 * Returns a line for the test's output.
 */
export function assertRolloutWithinSkew(samples: readonly VersionSample[], next: string): string {
  const breaches = samples.flatMap((sample) => skewBreaches(sample).map((breach) => `${new Date(sample.at).toISOString()}: ${breach}`));
  const mixed = samples.filter((s) => new Set(s.apiservers.values()).size > 1).length;
  const last = samples.at(-1);
  assert.ok(mixed > 0, 'the samples saw apiservers of both versions at once (the skew check had something to judge)');
  assert.deepEqual(breaches, [], 'no sample breaks the version skew policy');
  assert.deepEqual(new Set(last?.apiservers.values()), new Set([next]), 'every apiserver reports the new version at the end');
  assert.deepEqual(new Set([...(last?.controllerManagers.values() ?? []), ...(last?.schedulers.values() ?? [])]), new Set([next]), 'every controller-manager and scheduler reports the new version at the end');
  return `${String(samples.length)} version samples, ${String(mixed)} with apiservers at two versions`;
}

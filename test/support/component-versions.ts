import { readdirSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
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

/** GET over HTTPS, any serving certificate (the version is what is read, not who serves it); undefined when nothing answers. */
function get(host: string, port: number, path: string, client: ClientCertificate | undefined): Promise<string | undefined> {
  return new Promise((resolve) => {
    const req = request({ host, port, path, method: 'GET', rejectUnauthorized: false, timeout: 2000, ...(client ?? {}) }, (res) => {
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

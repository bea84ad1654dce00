import { accessSync, constants, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { InvalidInputError } from '../api/errors.ts';
import type { StateStore } from '../ports/state-store.ts';
import { DEFAULT_KEY_FILE, loadKeyFile, type SealingKeys } from '../adapters/sealing-keys.ts';

/**
 * Where the records live: `--store sqlite` (the default, a file in the state dir, for one host) or
 * `--store etcd` (an etcd cluster, shared by every host and process that points at it, such as a
 * management control plane fastplane itself brought up). Flags win over the FASTPLANE_* variables.
 * An etcd store is reached over https with a client certificate, or with --insecure-store only.
 * `--store kubernetes --kubeconfig FILE` keeps them in a Kubernetes API server (namespace
 * --store-namespace, default fastplane-system), where Cluster API keeps its own.
 * The key file that seals the documents in it is this host's (--secrets-key).
 */

export interface StoreFlags {
  store?: string;
  etcdEndpoints?: string;
  etcdCacert?: string;
  etcdCert?: string;
  etcdKey?: string;
  insecureStore?: boolean;
  secretsKey?: string;
  /** Also the kubeconfig of `install` and `controller`: not an error without --store kubernetes. */
  kubeconfig?: string;
  storeNamespace?: string;
}

export type StoreChoice =
  | { kind: 'sqlite'; path: string }
  | { kind: 'etcd'; endpoints: string[]; tls: { caFile?: string; certFile?: string; keyFile?: string } }
  | { kind: 'kubernetes'; kubeconfig: string; namespace?: string };

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** A setting from its flag, else its environment variable, with the name to use in messages. */
function setting(flag: string | undefined, flagName: string, env: NodeJS.ProcessEnv, envName: string): { value: string; name: string } | undefined {
  if (flag !== undefined) return { value: flag, name: flagName };
  const fromEnv = env[envName];
  return fromEnv === undefined || fromEnv === '' ? undefined : { value: fromEnv, name: envName };
}

function checkFile(file: { value: string; name: string }, problems: string[]): string {
  try {
    if (!statSync(file.value).isFile()) problems.push(`${file.name}: not a file: ${file.value}`);
    else accessSync(file.value, constants.R_OK);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    problems.push(`${file.name}: ${code === 'ENOENT' ? 'no such file' : 'cannot read'}: ${file.value}`);
  }
  return file.value;
}

function checkEndpoints(list: { value: string; name: string }, problems: string[]): string[] {
  const endpoints = list.value.split(',').map((item) => item.trim()).filter((item) => item !== '');
  if (endpoints.length === 0) problems.push(`${list.name}: no URL given`);
  for (const endpoint of endpoints) {
    let url: URL | undefined;
    try {
      url = new URL(endpoint);
    } catch {
      url = undefined;
    }
    if (url === undefined || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '' || url.port === '') {
      problems.push(`${list.name}: ${endpoint} is not a client URL such as https://10.0.0.1:2379 (scheme, host and port)`);
    }
  }
  return endpoints;
}

/** Reads and checks the store settings; every problem is an input error naming its flag or variable. */
export function chooseStore(flags: StoreFlags, stateDir: string, env: NodeJS.ProcessEnv = process.env): StoreChoice {
  const kind = setting(flags.store, '--store', env, 'FASTPLANE_STORE');
  const etcdFlags = (
    [
      [flags.etcdEndpoints, '--etcd-endpoints'],
      [flags.etcdCacert, '--etcd-cacert'],
      [flags.etcdCert, '--etcd-cert'],
      [flags.etcdKey, '--etcd-key'],
      [flags.insecureStore === true ? 'given' : undefined, '--insecure-store'],
    ] as const
  ).filter(([value]) => value !== undefined);
  const namespace = setting(flags.storeNamespace, '--store-namespace', env, 'FASTPLANE_STORE_NAMESPACE');
  if (namespace !== undefined && kind?.value !== 'kubernetes') throw new InvalidInputError([`${namespace.name}: only with --store kubernetes`]);
  if (kind?.value === 'kubernetes') {
    const problems = etcdFlags.map(([, name]) => `${name}: only with --store etcd (the store is kubernetes from ${kind.name})`);
    const kubeconfig = setting(flags.kubeconfig, '--kubeconfig', env, 'FASTPLANE_KUBECONFIG');
    if (kubeconfig === undefined) problems.push('--kubeconfig: required with --store kubernetes (or FASTPLANE_KUBECONFIG): the kubeconfig of the cluster that keeps the records');
    else checkFile(kubeconfig, problems);
    if (namespace !== undefined && !DNS_LABEL.test(namespace.value)) problems.push(`${namespace.name}: must be a namespace name (a DNS label), got ${namespace.value}`);
    if (problems.length > 0 || kubeconfig === undefined) throw new InvalidInputError(problems);
    return { kind: 'kubernetes', kubeconfig: resolve(kubeconfig.value), ...(namespace === undefined ? {} : { namespace: namespace.value }) };
  }
  if (kind === undefined || kind.value === 'sqlite') {
    // Variables may be set for other invocations; a flag given here would be silently unused.
    if (etcdFlags.length > 0) {
      throw new InvalidInputError(etcdFlags.map(([, name]) => `${name}: only with --store etcd (the store is ${kind?.value ?? 'sqlite'}${kind ? ` from ${kind.name}` : ', the default'})`));
    }
    return { kind: 'sqlite', path: join(stateDir, 'fastplane.db') };
  }
  if (kind.value !== 'etcd') throw new InvalidInputError([`${kind.name}: must be sqlite, etcd or kubernetes, got ${kind.value}`]);

  const problems: string[] = [];
  const list = setting(flags.etcdEndpoints, '--etcd-endpoints', env, 'FASTPLANE_ETCD_ENDPOINTS');
  const endpoints = list === undefined ? [] : checkEndpoints(list, problems);
  if (list === undefined) problems.push('--etcd-endpoints: required with --store etcd (or FASTPLANE_ETCD_ENDPOINTS), e.g. https://10.0.0.1:2379,https://10.0.0.2:2379');
  const ca = setting(flags.etcdCacert, '--etcd-cacert', env, 'FASTPLANE_ETCD_CACERT');
  const cert = setting(flags.etcdCert, '--etcd-cert', env, 'FASTPLANE_ETCD_CERT');
  const key = setting(flags.etcdKey, '--etcd-key', env, 'FASTPLANE_ETCD_KEY');
  if ((cert === undefined) !== (key === undefined)) {
    problems.push(cert === undefined ? '--etcd-cert: required with --etcd-key (a client certificate and its key go together)' : '--etcd-key: required with --etcd-cert (a client certificate and its key go together)');
  }
  const tls = {
    ...(ca === undefined ? {} : { caFile: checkFile(ca, problems) }),
    ...(cert === undefined ? {} : { certFile: checkFile(cert, problems) }),
    ...(key === undefined ? {} : { keyFile: checkFile(key, problems) }),
  };
  const insecure = flags.insecureStore === true || ['1', 'true'].includes(env.FASTPLANE_INSECURE_STORE ?? '');
  if (!insecure) {
    // Every record and the sealed secrets cross this connection: refused in clear, or to anyone unnamed.
    for (const endpoint of endpoints.filter((e) => /^http:/i.test(e))) {
      problems.push(`${list?.name ?? '--etcd-endpoints'}: ${endpoint} is plain http, readable and changeable on the way; use https with a client certificate, or pass --insecure-store`);
    }
    if (cert === undefined && key === undefined) problems.push('--etcd-cert: required with --store etcd (a client certificate the store authenticates, with --etcd-key), or pass --insecure-store');
  }
  if (problems.length > 0) throw new InvalidInputError(problems);
  return { kind: 'etcd', endpoints, tls };
}

/** The key file that seals the store's documents: --secrets-key, $FASTPLANE_SECRETS_KEY, else the state dir's, made when missing. */
export interface KeyFileChoice {
  path: string;
  /** Only the state dir's default is created; a named file must be there. */
  create: boolean;
}

export function chooseKeyFile(flags: StoreFlags, stateDir: string, env: NodeJS.ProcessEnv = process.env): KeyFileChoice {
  const named = setting(flags.secretsKey, '--secrets-key', env, 'FASTPLANE_SECRETS_KEY');
  return named === undefined ? { path: join(stateDir, DEFAULT_KEY_FILE), create: true } : { path: resolve(named.value), create: false };
}

export interface OpenedStore {
  store: StateStore;
  /** Where the records are, for messages. */
  location: string;
  /** This host's keys for the store's documents. */
  sealing: SealingKeys;
}

/**
 * What opens the chosen store, loaded ahead (etcd's client, gRPC, only when it is the one chosen) so
 * that the store itself is opened after every other setting was checked: bad input creates nothing.
 */
export async function storeOpener(choice: StoreChoice, keyFile: KeyFileChoice): Promise<() => OpenedStore> {
  // A key file that is there is checked now; the state dir's is made once the state dir is.
  const known = keyFile.create ? undefined : loadKeyFile(keyFile.path, false);
  const sealing = (): SealingKeys => known ?? loadKeyFile(keyFile.path, true);
  if (choice.kind === 'sqlite') {
    const { SqliteStateStore } = await import('../adapters/stores/sqlite-state-store.ts');
    return () => ({ sealing: sealing(), store: new SqliteStateStore(choice.path), location: dirname(choice.path) });
  }
  if (choice.kind === 'kubernetes') {
    const { KubernetesStateStore } = await import('../adapters/stores/kubernetes-state-store.ts');
    return () => {
      const store = new KubernetesStateStore({ kubeconfig: choice.kubeconfig, ...(choice.namespace === undefined ? {} : { namespace: choice.namespace }) });
      return { sealing: sealing(), store, location: store.describe() };
    };
  }
  const { EtcdStateStore } = await import('../adapters/stores/etcd-state-store.ts');
  return () => {
    const keys = sealing();
    const store = new EtcdStateStore({ endpoints: choice.endpoints, tls: choice.tls });
    return { sealing: keys, store, location: store.describe() };
  };
}

import { kubernetesBinDir } from '../adapters/kubernetes/kubernetes-binaries.ts';
import { chmodSync, mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Logger } from 'pino';
import type { ControlPlane } from '../api/control-plane.ts';
import { parseDuration } from '../api/duration.ts';
import { InvalidInputError } from '../api/errors.ts';
import { EtcdClientCache } from '../adapters/etcd/etcd-client-cache.ts';
import { specEtcdBinary } from '../adapters/etcd/etcd-binaries.ts';
import { sha256OfFile } from '../adapters/state-files.ts';
import type { ClusterPorts, Runtime } from '../app/runtime.ts';
import type { CareService } from '../care/care-service.ts';
import { withInjectedFaults } from '../adapters/etcd/fault-injecting-etcd-admin.ts';
import { stateScope, type ProviderEnvironment } from '../adapters/providers/provider-environment.ts';
import { providerFor } from '../adapters/providers/registry.ts';
import { resealScope, sealedDocuments, type Resealed } from '../adapters/sealed-documents.ts';
import { DEFAULT_KEY_FILE, loadKeyFile, type SealingKeys } from '../adapters/sealing-keys.ts';
import { ownIdentity } from '../adapters/host/process-identity.ts';
import { SqliteStateStore } from '../adapters/stores/sqlite-state-store.ts';
import type { MachineProvider } from '../ports/machine-provider.ts';
import type { StateStore } from '../ports/state-store.ts';
import type { EventRecord } from '../domain/machine.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { systemClock } from '../ports/clock.ts';
import { DEFAULT_LEASE_TTL_MS, leaseCallBoundMs } from '../lease/lease-keeper.ts';
import type { ReconcileDeps } from '../reconciler/run.ts';
import { careFor } from './care.ts';
import { openLogger, parseLogOptions, type LogOptions } from './logging.ts';
import type { OpenedStore, StoreFlags } from './store-selection.ts';
import { testHooksFromEnv, type TestHooks } from './test-hooks.ts';

export interface GlobalOptions extends StoreFlags {
  stateDir?: string;
  logLevel?: string;
  logFormat?: string;
  leaseTtl?: string;
}

/** --lease-ttl: how long a cluster's lease outlives its holder's last renewal (renewed every 2 s at most). */
function parseLeaseTtl(text: string | undefined, defaultMs = DEFAULT_LEASE_TTL_MS): number {
  if (text === undefined) return defaultMs;
  const ms = parseDuration(text);
  if (ms === undefined || ms < 1_000) throw new InvalidInputError([`--lease-ttl: must be a duration of 1s or more, such as 10s, got ${text}`]);
  return ms;
}

/** --state-dir, else $FASTPLANE_HOME, else ~/.fastplane. */
export function resolveStateDir(options: GlobalOptions): string {
  return resolve(options.stateDir ?? process.env.FASTPLANE_HOME ?? join(homedir(), '.fastplane'));
}

/** What differs for a long-running command (`fastplane controller`). */
export interface ContextOptions {
  /** --lease-ttl when not given (the CLI's commands: 10 s). */
  defaultLeaseTtlMs?: number;
  /** Log JSON lines on stdout too. */
  logToStdout?: boolean;
}

/** This host's runtime as the global flags choose it: everything a command needs, opened once and closed once. */
export class CliContext implements Runtime {
  readonly store: StateStore;
  /** Where the records are, for messages: the state dir, or the etcd endpoints and prefix. */
  readonly storeLocation: string;
  private logger: Logger | undefined;
  private readonly logOptions: LogOptions;
  readonly hooks: TestHooks;
  readonly leaseTtlMs: number;
  /** This process as its kernel knows it, for the lease records it writes. */
  readonly identity = ownIdentity();
  private readonly etcdClients: EtcdClientCache;
  /** This host's key file: what seals the providers' documents in the store. */
  private readonly sealing: SealingKeys;
  private readonly providers = new Map<string, MachineProvider>();

  /** `openStore`: opens the store chosen by --store (store-selection.ts); without it, the state dir's SQLite file. */
  constructor(readonly stateDir: string, logLevel = 'info', logFormat?: string, leaseTtl?: string, openStore?: () => OpenedStore, options: ContextOptions = {}) {
    // Before anything is opened: a refused test hook, log format or TTL is an input error with nothing created.
    this.hooks = testHooksFromEnv();
    this.leaseTtlMs = parseLeaseTtl(leaseTtl, options.defaultLeaseTtlMs);
    this.logOptions = { ...parseLogOptions(logLevel, logFormat), ...(options.logToStdout === true ? { stdout: true } : {}) };
    // Records, logs, certificates and backups: nothing in the state dir is for other users.
    mkdirSync(stateDir, { recursive: true, mode: 0o700 });
    chmodSync(stateDir, 0o700);
    const opened = openStore?.();
    this.store = opened?.store ?? new SqliteStateStore(join(stateDir, 'fastplane.db'));
    this.storeLocation = opened?.location ?? stateDir;
    this.sealing = opened?.sealing ?? loadKeyFile(join(stateDir, DEFAULT_KEY_FILE), true);
    // Membership calls are bounded so that the lease, checked before each, outlives them (renew deadline).
    this.etcdClients = new EtcdClientCache(leaseCallBoundMs(this.leaseTtlMs));
  }

  /** The log file (and stderr or stdout as asked), opened when a command first logs. */
  get log(): Logger {
    this.logger ??= openLogger(join(this.stateDir, 'fastplane.log'), this.logOptions);
    return this.logger;
  }

  /** The control plane's provider (spec.provider.name), one per control plane so its connections are shared by every pass. */
  provider(manifest: ControlPlane): MachineProvider {
    const name = manifest.metadata.name;
    const known = this.providers.get(name);
    if (known) return known;
    const provider = providerFor(manifest, this.providerEnvironment());
    this.providers.set(name, provider);
    return provider;
  }

  private providerEnvironment(): ProviderEnvironment {
    const { addressPrefix, provisioningFailureMarker, certValidityMs } = this.hooks;
    return { stateDir: this.stateDir, store: sealedDocuments(this.store, this.sealing), addressPrefix, provisioningFailureMarker, certValidityMs };
  }

  /** Seals the provider's documents of the control plane again with the key file's first key. */
  resealSecrets(manifest: ControlPlane): Promise<Resealed> {
    return resealScope(this.store, this.sealing, stateScope(manifest.spec.provider.name, manifest.metadata.name));
  }

  /** The key that seals, for messages: its name and file. */
  get sealingKey(): string {
    return `${this.sealing.current.name} (${this.sealing.source})`;
  }

  care(manifest: ControlPlane): CareService {
    return careFor(this, manifest);
  }

  checkBinaries(manifest: ControlPlane): void {
    specEtcdBinary(manifest.spec.version, manifest.spec.etcd.binaries);
    const kubernetes = manifest.spec.kubernetes;
    if (kubernetes !== undefined) kubernetesBinDir(kubernetes.version, kubernetes.binaries);
  }

  sha256(file: string): Promise<string> {
    return sha256OfFile(file);
  }

  /** The control plane's ports: its provider first, since the etcd client presents the provider's client certificate. */
  async clusterPorts(manifest: ControlPlane): Promise<ClusterPorts> {
    const cluster = manifest.metadata.name;
    const provider = this.provider(manifest);
    const care = this.care(manifest);
    const etcd = await this.etcdClients.clientFor(cluster, await provider.loadClientTls(cluster));
    return { cluster, etcd, provider, store: this.store, log: this.log, care };
  }

  /** What a reconcile pass needs over the control plane's ports, for each `writer` (fenced by the lease this process holds). */
  passDeps(ports: ClusterPorts, notify?: (event: EventRecord) => void): (writer: FencedWriter) => ReconcileDeps {
    return (writer) => ({
      ...ports,
      // Tests may ask for etcd answers that are hard to provoke (test hooks only).
      etcd: withInjectedFaults(ports.etcd, this.hooks.injectFaults),
      writer,
      clock: systemClock,
      failpoint: this.hooks.failpoint,
      notify: (event) => {
        this.log.info({ event }, event.message);
        notify?.(event);
      },
    });
  }

  async close(): Promise<void> {
    await this.etcdClients.close();
    await Promise.all([...this.providers.values()].map((provider) => provider.close()));
    await this.store.close();
    this.logger?.flush();
  }
}

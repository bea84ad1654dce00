import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import type { ControlPlane } from '../api/control-plane.ts';
import { parseDurationRange } from '../api/duration.ts';
import { Etcd3Admin, readTlsCredentials } from '../adapters/etcd3-admin.ts';
import { findEtcdBinary } from '../adapters/etcd-binaries.ts';
import { LocalProcessProvider } from '../adapters/local-process-provider.ts';
import { SqliteStateStore } from '../adapters/sqlite-state-store.ts';
import type { EventRecord } from '../domain/machine.ts';
import type { ExecutorDeps } from '../executor/execute.ts';
import { failpointsFromEnv } from '../executor/failpoints.ts';
import { withInjectedFaults } from '../adapters/fault-injecting-etcd-admin.ts';
import { systemClock } from '../ports/clock.ts';

export interface GlobalOptions {
  stateDir?: string;
  logLevel?: string;
}

/** --state-dir, else $FASTPLANE_HOME, else ~/.fastplane. */
export function resolveStateDir(options: GlobalOptions): string {
  return resolve(options.stateDir ?? process.env.FASTPLANE_HOME ?? join(homedir(), '.fastplane'));
}

/** Everything a command needs, opened once and closed once. */
export class CliContext {
  readonly store: SqliteStateStore;
  readonly log: Logger;
  /** One etcd client per control plane: each TLS cluster has its own CA and client certificate. */
  private readonly admins = new Map<string, Etcd3Admin>();

  constructor(readonly stateDir: string, logLevel = 'info') {
    mkdirSync(stateDir, { recursive: true });
    this.store = new SqliteStateStore(join(stateDir, 'fastplane.db'));
    this.log = pino({ level: logLevel }, pino.destination({ dest: join(stateDir, 'fastplane.log'), sync: true, mkdir: true }));
  }

  /** The local provider with the control plane's own provider settings. */
  provider(manifest: ControlPlane): LocalProcessProvider {
    const { provisioningDelay, deletionDelay, insecure } = manifest.spec.provider;
    return new LocalProcessProvider({
      stateDir: this.stateDir,
      // Separate address ranges let several state dirs (tests, demos) run side by side.
      addressPrefix: process.env.FASTPLANE_ADDRESS_PREFIX ?? '127.77',
      provisioningDelay: parseDurationRange(provisioningDelay) ?? { minMs: 0, maxMs: 0 },
      deletionDelay: parseDurationRange(deletionDelay) ?? { minMs: 0, maxMs: 0 },
      findBinary: findEtcdBinary,
      insecure,
    });
  }

  /** The control plane's etcd client, presenting fastplane's client certificate unless insecure. */
  etcd(manifest: ControlPlane): Etcd3Admin {
    const name = manifest.metadata.name;
    let admin = this.admins.get(name);
    if (!admin) {
      const tls = this.provider(manifest).clientTls(name);
      admin = new Etcd3Admin(tls === undefined ? {} : { credentials: () => readTlsCredentials(tls) });
      this.admins.set(name, admin);
    }
    return admin;
  }

  deps(manifest: ControlPlane, notify?: (event: EventRecord) => void): ExecutorDeps {
    const deps: ExecutorDeps = {
      cluster: manifest.metadata.name,
      // Tests may ask for etcd answers that are hard to provoke (FASTPLANE_INJECT_FAULTS).
      etcd: withInjectedFaults(this.etcd(manifest)),
      provider: this.provider(manifest),
      store: this.store,
      clock: systemClock,
      failpoint: failpointsFromEnv(),
      notify: (event) => {
        this.log.info({ event }, event.message);
        notify?.(event);
      },
    };
    return deps;
  }

  async close(): Promise<void> {
    await Promise.all([...this.admins.values()].map((admin) => admin.close()));
    this.store.close();
    this.log.flush();
  }
}

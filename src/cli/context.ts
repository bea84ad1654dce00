import { mkdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join, resolve } from 'node:path';
import { pino, type Logger } from 'pino';
import type { ControlPlane } from '../api/control-plane.ts';
import { parseDurationRange } from '../api/duration.ts';
import { Etcd3Admin, readTlsCredentials } from '../adapters/etcd3-admin.ts';
import { findEtcdBinary } from '../adapters/etcd-binaries.ts';
import { withInjectedFaults } from '../adapters/fault-injecting-etcd-admin.ts';
import { LocalProcessProvider } from '../adapters/local-process-provider.ts';
import { SqliteStateStore } from '../adapters/sqlite-state-store.ts';
import type { EventRecord } from '../domain/machine.ts';
import type { ExecutorDeps } from '../executor/execute.ts';
import type { FencedWriter } from '../executor/fenced-writer.ts';
import { systemClock } from '../ports/clock.ts';
import type { ObserveDeps } from '../reconciler/observe.ts';
import { testHooksFromEnv, type TestHooks } from './test-hooks.ts';

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
  readonly hooks: TestHooks;
  /** One etcd client per control plane: each TLS cluster has its own CA and client certificate. */
  private readonly admins = new Map<string, Etcd3Admin>();

  constructor(readonly stateDir: string, logLevel = 'info') {
    // Before anything is opened: a refused test hook is an input error with nothing created.
    this.hooks = testHooksFromEnv();
    mkdirSync(stateDir, { recursive: true });
    this.store = new SqliteStateStore(join(stateDir, 'fastplane.db'));
    this.log = pino({ level: logLevel }, pino.destination({ dest: join(stateDir, 'fastplane.log'), sync: true, mkdir: true }));
  }

  /** The local provider with the control plane's own provider settings. */
  provider(manifest: ControlPlane): LocalProcessProvider {
    const { provisioningDelay, deletionDelay, insecure } = manifest.spec.provider;
    return new LocalProcessProvider({
      stateDir: this.stateDir,
      addressPrefix: this.hooks.addressPrefix,
      provisioningDelay: parseDurationRange(provisioningDelay) ?? { minMs: 0, maxMs: 0 },
      deletionDelay: parseDurationRange(deletionDelay) ?? { minMs: 0, maxMs: 0 },
      findBinary: findEtcdBinary,
      insecure,
      honourFailureMarker: this.hooks.provisioningFailureMarker,
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

  /** What observing needs: reads only (status). */
  observeDeps(manifest: ControlPlane): ObserveDeps {
    return { cluster: manifest.metadata.name, etcd: this.etcd(manifest), provider: this.provider(manifest), store: this.store };
  }

  /** What a reconcile pass needs, writing through `writer` (fenced by the lease this process holds). */
  deps(manifest: ControlPlane, writer: FencedWriter, notify?: (event: EventRecord) => void): ExecutorDeps {
    return {
      ...this.observeDeps(manifest),
      // Tests may ask for etcd answers that are hard to provoke (test hooks only).
      etcd: withInjectedFaults(this.etcd(manifest), this.hooks.injectFaults),
      writer,
      clock: systemClock,
      failpoint: this.hooks.failpoint,
      notify: (event) => {
        this.log.info({ event }, event.message);
        notify?.(event);
      },
    };
  }

  async close(): Promise<void> {
    await Promise.all([...this.admins.values()].map((admin) => admin.close()));
    await this.store.close();
    this.log.flush();
  }
}

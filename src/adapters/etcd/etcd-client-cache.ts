import { existsSync, readFileSync } from 'node:fs';
import type { TlsFiles } from '../../ports/etcd-admin.ts';
import type { Etcd3Admin } from './etcd3-admin.ts';

/**
 * One etcd client per control plane, shared by every pass of every reconcile in this process (the
 * CLI's run, the controller's workers): each TLS cluster has its own CA and client certificate.
 * etcd3 (gRPC, protobufjs) is most of a start's cost, so it is loaded only when a client is first asked for.
 */
export class EtcdClientCache {
  private readonly admins = new Map<string, { admin: Etcd3Admin; trust: string }>();

  /** `callTimeoutMs` bounds every membership call, so a lease checked before each outlives it. */
  constructor(private readonly callTimeoutMs: number) {}

  async clientFor(cluster: string, tls: TlsFiles | undefined): Promise<Etcd3Admin> {
    // A cluster deleted and made again under its name (`restore --replace`) has a new CA on the same
    // addresses: connections made with the old one would never verify again, so they go with it.
    // (Before its first machine a cluster has no CA yet: nothing to connect with, nothing to compare.)
    const trust = tls === undefined ? '' : [tls.caFile, tls.certFile].map((file) => (existsSync(file) ? readFileSync(file, 'utf8') : '')).join('');
    const known = this.admins.get(cluster);
    if (known?.trust === trust) return known.admin;
    const { Etcd3Admin, readTlsCredentials } = await import('./etcd3-admin.ts');
    // Another call may have made it while the module loaded.
    const current = this.admins.get(cluster);
    if (current?.trust === trust) return current.admin;
    if (current) await current.admin.close();
    const { callTimeoutMs } = this;
    const admin = new Etcd3Admin(tls === undefined ? { callTimeoutMs } : { callTimeoutMs, credentials: () => readTlsCredentials(tls) });
    this.admins.set(cluster, { admin, trust });
    return admin;
  }

  async close(): Promise<void> {
    await Promise.all([...this.admins.values()].map(({ admin }) => admin.close()));
  }
}

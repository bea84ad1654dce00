import type { ControlPlane } from '../api/control-plane.ts';
import { CareService, type EtcdClients } from '../care/care-service.ts';
import { systemClock } from '../ports/clock.ts';
import type { Logger } from '../ports/logger.ts';
import type { MachineProvider } from '../ports/machine-provider.ts';
import type { StateStore } from '../ports/state-store.ts';

/** What the care of a control plane is built from on this host: the CLI context has all of it. */
export interface CareHost {
  readonly stateDir: string;
  readonly store: StateStore;
  readonly storeLocation: string;
  readonly log: Logger;
  provider(manifest: ControlPlane): MachineProvider;
}

/**
 * The care service of a control plane, with this host's adapters. etcd3, the x509 library, etcd's
 * snapshot tools and the executor load only when an operation needs them: `status` observes through
 * this too and must stay quick.
 */
export function careFor(host: CareHost, manifest: ControlPlane): CareService {
  const provider = host.provider(manifest);
  const cluster = manifest.metadata.name;
  return new CareService({
    manifest,
    stateDir: host.stateDir,
    store: host.store,
    storeLocation: host.storeLocation,
    provider,
    async withClients<T>(use: (clients: EtcdClients) => Promise<T>): Promise<T> {
      const [{ Etcd3Admin, readTlsCredentials }, { Etcd3Maintenance }] = await Promise.all([import('../adapters/etcd/etcd3-admin.ts'), import('../adapters/etcd/etcd3-maintenance.ts')]);
      const tls = provider.clientTls(cluster);
      const options = tls === undefined ? {} : { credentials: () => readTlsCredentials(tls) };
      const clients = { admin: new Etcd3Admin(options), maintenance: new Etcd3Maintenance(options) };
      try {
        return await use(clients);
      } finally {
        await Promise.all([clients.admin.close(), clients.maintenance.close()]);
      }
    },
    snapshots: {
      async status(version, file) {
        const [{ snapshotFileStatus }, { etcdBinaryFinder }] = await Promise.all([import('../adapters/etcd/etcd-tools.ts'), import('../adapters/etcd/etcd-binaries.ts')]);
        return snapshotFileStatus(version, file, etcdBinaryFinder(manifest.spec.etcd.binaries));
      },
      sha256: async (file) => (await import('../adapters/state-files.ts')).sha256OfFile(file),
      writeAtomic: async (path, data, mode) => (await import('../adapters/state-files.ts')).writeFileAtomic(path, data, mode),
    },
    async downgrade() {
      const [{ EtcdctlDowngrade }, { etcdBinaryFinder }] = await Promise.all([import('../adapters/etcd/etcd-downgrade.ts'), import('../adapters/etcd/etcd-binaries.ts')]);
      const tls = provider.clientTls(cluster);
      return new EtcdctlDowngrade({ findBinary: etcdBinaryFinder(manifest.spec.etcd.binaries), ...(tls === undefined ? {} : { tls }) });
    },
    describeCertificate: async (file) => (await import('../adapters/pki/local-pki.ts')).describeCertificate(file),
    // Each provider reads its members' data dirs where they lie: `recover` compares stopped members too.
    committedIndexOffline: (machine: string) => provider.committedIndexOffline(cluster, machine),
    clock: systemClock,
    // The log file opens when care first logs, not when a command builds the service.
    log: { debug: (fields, message) => { host.log.debug(fields, message); }, info: (fields, message) => { host.log.info(fields, message); }, warn: (fields, message) => { host.log.warn(fields, message); } },
  });
}

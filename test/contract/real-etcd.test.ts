import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { Etcd3Admin, readTlsCredentials } from '../../src/adapters/etcd/etcd3-admin.ts';
import { findEtcdBinary, listEtcdVersions } from '../../src/adapters/etcd/etcd-binaries.ts';
import { LocalProcessProvider } from '../../src/adapters/providers/local/local-process-provider.ts';
import { systemClock } from '../../src/ports/clock.ts';
import { defineEtcdAdminContract, type ContractWorld } from './etcd-admin-contract.ts';

function realWorld(version: string): Promise<ContractWorld> {
  // A cluster per version: the provider gives each its own block of addresses, so suites may run at once.
  const cluster = `contract-${version.replace(/\./g, '')}`;
  const stateDir = mkdtempSync(join(tmpdir(), 'fastplane-contract-'));
  // A short grace: each case stops all its members at once, and a leader whose peers are stopping
  // spends ~7 s on a doomed leadership transfer before it exits.
  const provider = new LocalProcessProvider({ stateDir, addressPrefix: process.env.FASTPLANE_ADDRESS_PREFIX ?? '127.92', findBinary: findEtcdBinary, stopGraceMs: 1500 });
  // Mutual TLS, the provider's default: every case (learners joining, promotion, removal) also proves
  // that members of this version accept each other's peer certificates.
  const tls = provider.clientTls(cluster);
  if (tls === undefined) throw new Error('the contract suite runs with TLS');
  const admin = new Etcd3Admin({ credentials: () => readTlsCredentials(tls) });
  return Promise.resolve({
    admin,
    provider,
    clock: systemClock,
    cluster,
    version,
    async teardown() {
      await admin.close();
      // Kills every member the suite started, by the PIDs the provider recorded, and removes its folder.
      await provider.destroyCluster(cluster);
      rmSync(stateDir, { recursive: true, force: true });
    },
  });
}

// Every installed version (3.4.23 from Debian, 3.5.x from trixie and testing, see
// scripts/install-etcd.sh). Each suite has its own cluster, so a few versions run at once: a case
// mostly waits on etcd.
const versions = listEtcdVersions();
describe('EtcdAdmin contract on every installed etcd', { concurrency: 3 }, () => {
  for (const version of versions) defineEtcdAdminContract(`EtcdAdmin contract: Etcd3Admin + LocalProcessProvider on etcd ${version}`, () => realWorld(version));
});
if (!versions.some((version) => version.startsWith('3.5.'))) {
  test('EtcdAdmin contract on etcd 3.5', { skip: 'etcd 3.5 is not installed: run `bash scripts/install-etcd.sh`' }, () => undefined);
}

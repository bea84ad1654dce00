import { existsSync } from 'node:fs';
import { join } from 'node:path';
import type { TlsFiles } from '../../ports/etcd-admin.ts';
import type { CaRotationPhase } from '../../ports/machine-provider.ts';
import type { StoredClusterState } from '../stored-cluster-state.ts';
import { clientTlsFiles, memberTlsFiles, type MemberTlsFiles } from './pki-files.ts';

const loadPki = (): Promise<typeof import('./local-pki.ts')> => import('./local-pki.ts');

/**
 * A cluster's certificates as both providers keep them: the CA and fastplane's client certificate in
 * `pki/`, each machine's in `machines/<name>/pki/`, all kept in the record store (StoredClusterState)
 * and worked on in this host's copy. The x509 code loads only when a certificate is made.
 */
export class ClusterPki {
  constructor(
    private readonly state: (cluster: string) => StoredClusterState,
    /** Lifetime of member and client certificates (tests only); default a year. */
    private readonly validityMs?: number,
  ) {}

  pkiDir(cluster: string): string {
    return join(this.state(cluster).cacheDir, 'pki');
  }

  memberDir(cluster: string, name: string): string {
    return join(this.state(cluster).cacheDir, memberPki(name));
  }

  clientTls(cluster: string): TlsFiles {
    return clientTlsFiles(this.pkiDir(cluster));
  }

  /** The client certificate's files, brought to this host from the record store first. */
  loadClientTls(cluster: string): Promise<TlsFiles> {
    return this.withCa(cluster, () => Promise.resolve(this.clientTls(cluster)), 'read');
  }

  /** A member's server and peer certificates for its address (new ones with `renew`); the CA made on first use. */
  async issueMember(cluster: string, name: string, address: string, renew = false): Promise<MemberTlsFiles> {
    const pki = await loadPki();
    return this.state(cluster).withFiles(['pki', memberPki(name)], () => pki.issueMemberCertificates(this.pkiDir(cluster), this.memberDir(cluster, name), name, address, { renew, validityMs: this.validityMs }));
  }

  /** Runs `use` on this host's copy of the CA and a member's certificates, as stored; nothing is stored back. */
  readMember<T>(cluster: string, name: string, use: () => Promise<T>): Promise<T> {
    return this.state(cluster).withFiles(['pki', memberPki(name)], use, 'read');
  }

  /** A machine's certificates, gone from the store and from this host. */
  async forgetMember(cluster: string, name: string, remove: () => Promise<void>): Promise<void> {
    await this.state(cluster).withFiles([memberPki(name)], remove);
  }

  async renewClientCertificate(cluster: string): Promise<void> {
    const pki = await loadPki();
    await this.withCa(cluster, () => pki.renewClientCertificate(this.pkiDir(cluster), this.validityMs));
  }

  async caRotationPhase(cluster: string): Promise<CaRotationPhase | undefined> {
    const pki = await loadPki();
    return this.withCa(cluster, () => pki.caRotationPhase(this.pkiDir(cluster)), 'read');
  }

  async advanceCaRotation(cluster: string, phase: CaRotationPhase | undefined): Promise<void> {
    const pki = await loadPki();
    await this.withCa(cluster, () => pki.advanceCaRotation(this.pkiDir(cluster), phase));
  }

  /** Every certificate file of the cluster as stored: its CA, fastplane's client, each named machine's server and peer. */
  certificateFiles(cluster: string, names: readonly string[]): Promise<string[]> {
    const client = this.clientTls(cluster);
    const members = names.flatMap((name) => {
      const files = memberTlsFiles(this.pkiDir(cluster), this.memberDir(cluster, name));
      return [files.certFile, files.peerCertFile];
    });
    return this.state(cluster).withFiles(['pki', ...names.map(memberPki)], () => Promise.resolve([client.caFile, client.certFile, ...members].filter((file) => existsSync(file))), 'read');
  }

  /** Runs `use` on this host's copy of the CA files, as stored (and stores what a change leaves). */
  withCa<T>(cluster: string, use: () => Promise<T>, mode: 'change' | 'read' = 'change'): Promise<T> {
    return this.state(cluster).withFiles(['pki'], use, mode);
  }
}

/** A machine's certificates in the cluster's folder. */
export function memberPki(name: string): string {
  return `machines/${name}/pki`;
}

import { existsSync } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { InvalidInputError } from '../../../api/errors.ts';
import type { MemberLaunch } from '../../../ports/machine-provider.ts';
import { findEtcdBinary } from '../../etcd/etcd-binaries.ts';
import { restoreSnapshot } from '../../etcd/etcd-tools.ts';
import { DEFAULT_SNAPSHOT_COUNT, memberFlags } from '../../host/member-flags.ts';
import { spawnDetached, stopProcess } from '../../host/processes.ts';
import type { ClusterPki } from '../../pki/cluster-pki.ts';
import { memberTlsFiles } from '../../pki/pki-files.ts';
import { sha256OfFile } from '../../state-files.ts';
import type { MachineFile } from './local-machine.ts';

export interface LocalEtcdOptions {
  findBinary?: (version: string) => string;
  /** How long a member gets to exit after SIGTERM before SIGKILL (default 10 s). */
  stopGraceMs?: number;
  snapshotCount?: number;
}

/** The local provider's etcd members: processes of this host, their data dirs restored here first when asked. */
export class LocalEtcd {
  private readonly findBinary: (version: string) => string;
  private readonly stopGraceMs: number;
  private readonly snapshotCount: number;

  constructor(
    private readonly pki: ClusterPki,
    options: LocalEtcdOptions,
  ) {
    this.findBinary = options.findBinary ?? findEtcdBinary;
    this.stopGraceMs = options.stopGraceMs ?? 10_000;
    this.snapshotCount = options.snapshotCount ?? DEFAULT_SNAPSHOT_COUNT;
  }

  /** Starts the machine's member detached, logging to `logFile`; resolves with its PID. */
  async spawn(machine: MachineFile, dataDir: string, logFile: string, launch: MemberLaunch): Promise<number> {
    await this.restoreDataDir(machine, dataDir, launch);
    return spawnDetached(this.findBinary(launch.version), this.args(machine, dataDir, launch), logFile);
  }

  stop(pid: number, dataDir: string): Promise<void> {
    return stopProcess(pid, dataDir, this.stopGraceMs);
  }

  /**
   * Prepares the data dir of a cluster's first member from a snapshot (`fastplane restore`): the
   * snapshot's hash is checked again, then `snapshot restore` of the member's version writes a
   * staging dir that is renamed into place, so a data dir exists only complete. A data dir that exists
   * already was restored (or has run) before: it is used as it is.
   */
  private async restoreDataDir(machine: MachineFile, dataDir: string, launch: MemberLaunch): Promise<void> {
    if (launch.restoreFrom === undefined || existsSync(dataDir)) return;
    const { file, sha256 } = launch.restoreFrom;
    const actual = existsSync(file) ? await sha256OfFile(file) : 'missing';
    if (actual !== sha256) throw new InvalidInputError([`${file}: snapshot changed since restore checked it (sha256 ${actual}, expected ${sha256})`]);
    const staging = `${dataDir}.restoring`;
    await rm(staging, { recursive: true, force: true });
    await restoreSnapshot(launch.version, {
      file,
      dataDir: staging,
      memberName: launch.memberName,
      peerURL: machine.peerURL,
      initialCluster: launch.initialCluster,
      clusterToken: launch.clusterToken,
    }, this.findBinary);
    await rename(staging, dataDir);
  }

  private args(machine: MachineFile, dataDir: string, launch: MemberLaunch): string[] {
    // The machine's URLs, fixed at creation, say whether it was created with certificates.
    const tls = machine.clientURL.startsWith('https:') ? memberTlsFiles(this.pki.pkiDir(machine.cluster), this.pki.memberDir(machine.cluster, machine.name)) : undefined;
    return memberFlags({ clientURL: machine.clientURL, peerURL: machine.peerURL, dataDir, snapshotCount: this.snapshotCount, ...(tls === undefined ? {} : { tls }) }, launch);
  }
}

import { gunzipSync } from 'node:zlib';
import { readFile } from 'node:fs/promises';
import { StaleFenceError, type Fence, type MemberLaunch } from '../../../ports/machine-provider.ts';
import { memberFlags } from '../../host/member-flags.ts';
import type { ClusterPki } from '../../pki/cluster-pki.ts';
import { clientTlsFiles, memberTlsFiles } from '../../pki/pki-files.ts';
import { ensureRemoteCopy, restoreOnHost, writeRemoteFiles } from './remote-files.ts';
import { CHECK_SCRIPT, describeScript, FENCED, fenceFile, fenceLines, hexPort, lastWalScript, remoteMember, startScript, stopScript, wipeScript } from './remote-scripts.ts';
import { lastCommitIn } from '../../etcd/wal-commit.ts';
import type { ExecResult, SshConnections, SshTarget } from './ssh-connections.ts';
import { owner } from './ssh-machine.ts';

export const CLIENT_PORT = 2379;
export const PEER_PORT = 2380;

/** What the ssh provider sees of a member on its host. */
export interface MemberSeen {
  memberRunning: boolean;
  memberStartedAt?: number;
  memberDataBytes?: number;
}

/** A machine of the ssh provider on its host. */
export interface SshMachineOnHost {
  cluster: string;
  name: string;
  host: SshTarget;
}

/** What starting its member needs besides: its URLs. */
export interface SshMember extends SshMachineOnHost {
  clientURL: string;
  peerURL: string;
}

/**
 * The ssh provider's etcd members: the host's fitness, binaries, certificates, the process and its
 * state on the host, all as commands over ssh (remote-scripts.ts). The command line is the one every
 * provider builds (member-flags.ts).
 */
export class SshEtcd {
  constructor(
    private readonly ssh: SshConnections,
    private readonly pki: ClusterPki,
    private readonly options: { baseDir: string; findBinary: (version: string) => string; stopGraceMs?: number | undefined },
  ) {}

  /** The host's fence for the cluster checked and raised to `fence`, before a provisioning writes anything. */
  async passFence(machine: SshMachineOnHost, fence: Fence): Promise<void> {
    if (fence === undefined) return;
    const result = await this.ssh.exec(machine.host, fenceLines(fenceFile(this.options.baseDir, machine.cluster), fence).join('\n'));
    this.refusedByFence(machine, fence, result);
    if (result.code !== 0) throw new Error(`checking the lease fence on ${machine.host.address} failed: ${result.stderr.trim()}`);
  }

  /** Reachable, Linux, and nothing but maybe our own member on 2379/2380. */
  async checkHost(host: SshTarget): Promise<void> {
    const result = await this.ssh.exec(host, CHECK_SCRIPT);
    const [os = '', arch = '', ...listening] = result.stdout.trim().split('\n');
    if (os.trim() !== 'Linux') throw new Error(`${host.address} runs ${os.trim() || 'an unknown system'}, not Linux`);
    const ours = ({ x64: 'x86_64', arm64: 'aarch64' } as Record<string, string>)[process.arch] ?? process.arch;
    if (arch.trim() !== ours) {
      throw new Error(`${host.address} is ${arch.trim()}; the etcd binaries here are for ${process.arch}`);
    }
    const busy = [CLIENT_PORT, PEER_PORT].filter((port) => listening.some((entry) => entry.toUpperCase().endsWith(`:${hexPort(port)}`)));
    if (busy.length > 0) throw new Error(`${host.address}: port ${busy.join(' and ')} already in use`);
  }

  /** The version's binary on the host, copied once; the copy's sha256 is checked before it is used. */
  ensureBinary(host: SshTarget, version: string): Promise<string> {
    return ensureRemoteCopy(this.ssh, host, this.options.findBinary(version), `${this.binDir()}/etcd-${version}`);
  }

  /**
   * Issued here with the host's address, then written to the host: keys 0600, dirs 0700. `renew`:
   * new keys and certificates for a member that has run (stopped meanwhile), its data left alone.
   */
  async installCertificates(machine: SshMachineOnHost, renew = false, fence?: Fence): Promise<void> {
    const { host } = machine;
    // Renewed keys replace a member's own: the host's fence first (provisioning checks in its wipe).
    if (renew) await this.passFence(machine, fence);
    await this.pki.issueMember(machine.cluster, machine.name, host.address, renew);
    const remoteDir = remoteMember(this.options.baseDir, machine.cluster, machine.name).pkiDir;
    const remote = memberTlsFiles(remoteDir, remoteDir);
    // Read from a snapshot of the stored files, which no other call changes meanwhile.
    const files = await this.pki.readMember(machine.cluster, machine.name, (local) => {
      const pairs: [string, string, number][] = [
        [local.caFile, remote.caFile, 0o644],
        [local.certFile, remote.certFile, 0o644],
        [local.keyFile, remote.keyFile, 0o600],
        [local.peerCertFile, remote.peerCertFile, 0o644],
        [local.peerKeyFile, remote.peerKeyFile, 0o600],
      ];
      return Promise.all(pairs.map(async ([from, path, mode]) => ({ path, mode, content: await readFile(from) })));
    });
    if (!renew) {
      // A machine being provisioned has never run: whatever a machine of the same name left on this
      // host (a crash before its wipe) is not its data, and etcd must not start from it.
      const wiped = await this.ssh.exec(host, wipeScript(remoteMember(this.options.baseDir, machine.cluster, machine.name), this.fenceScript(machine.cluster, fence)));
      this.refusedByFence(machine, fence, wiped);
      if (wiped.code !== 0) throw new Error(`wiping ${owner(machine)} on ${host.address} failed: ${wiped.stderr.trim()}`);
    }
    await writeRemoteFiles(this.ssh, host, files);
  }

  /** Stops the member at once and removes its files, unless the host's fence is newer than `fence`. */
  async wipe(machine: SshMachineOnHost, fence: Fence): Promise<void> {
    const result = await this.ssh.exec(machine.host, wipeScript(remoteMember(this.options.baseDir, machine.cluster, machine.name), this.fenceScript(machine.cluster, fence)));
    this.refusedByFence(machine, fence, result);
    if (result.code !== 0) throw new Error(`wiping ${owner(machine)} on ${machine.host.address} failed: ${result.stderr.trim()}`);
  }

  async start(machine: SshMember, launch: MemberLaunch, fence: Fence): Promise<void> {
    const { cluster, host } = machine;
    const member = remoteMember(this.options.baseDir, cluster, machine.name);
    const binary = await this.ensureBinary(host, launch.version);
    const pki = memberTlsFiles(member.pkiDir, member.pkiDir);
    const args = memberFlags({ clientURL: machine.clientURL, peerURL: machine.peerURL, dataDir: member.dataDir, tls: pki }, launch);
    // Before the CA bundle is rewritten: a deposed holder's late start must not put back an old one.
    await this.passFence(machine, fence);
    // The cluster's CA bundle as it is now: a CA rotation changes it between its rolling restarts.
    const bundle = await this.pki.readCa(cluster, (pkiDir) => readFile(clientTlsFiles(pkiDir).caFile));
    await writeRemoteFiles(this.ssh, host, [{ path: pki.caFile, mode: 0o644, content: bundle }]);
    if (launch.restoreFrom !== undefined) {
      const target = { member, peerURL: machine.peerURL, localBinary: this.options.findBinary(launch.version), remoteBinDir: this.binDir(), baseDir: this.options.baseDir };
      await restoreOnHost(this.ssh, host, target, { ...launch, restoreFrom: launch.restoreFrom });
    }
    const result = await this.ssh.exec(host, startScript(member, binary, args, this.fenceScript(cluster, fence)));
    this.refusedByFence(machine, fence, result);
    if (result.code !== 0) throw new Error(`starting etcd on ${host.address} failed: ${result.stderr.trim()}`);
  }

  async stop(machine: SshMachineOnHost, fence: Fence): Promise<void> {
    const result = await this.ssh.exec(machine.host, stopScript(remoteMember(this.options.baseDir, machine.cluster, machine.name), this.options.stopGraceMs ?? 10_000, this.fenceScript(machine.cluster, fence)));
    this.refusedByFence(machine, fence, result);
    if (result.code !== 0) throw new Error(`stopping etcd on ${machine.host.address} failed: ${result.stderr.trim()}`);
  }

  /** Whether the member runs on its host now, and since when; fails with SshUnreachableError when the host does not answer. */
  async seen(machine: SshMachineOnHost): Promise<MemberSeen> {
    const result = await this.ssh.exec(machine.host, describeScript(remoteMember(this.options.baseDir, machine.cluster, machine.name)), { timeoutMs: 5_000 });
    const fields = Object.fromEntries(result.stdout.split('\n').map((line) => line.split('=') as [string, string]));
    const startedAt = Number(fields.startedAt);
    const dataBytes = Number(fields.dataBytes);
    const running = fields.running === '1';
    return {
      memberRunning: running,
      ...(fields.startedAt && Number.isFinite(startedAt) ? { memberStartedAt: startedAt } : {}),
      ...(running && fields.dataBytes && Number.isFinite(dataBytes) ? { memberDataBytes: dataBytes } : {}),
    };
  }

  /**
   * The member's committed index from its write-ahead log on the host, read there and parsed here as
   * the local data dirs are; undefined when it has none. Fails with SshUnreachableError when the host
   * does not answer.
   */
  async committedIndex(machine: SshMachineOnHost): Promise<number | undefined> {
    const result = await this.ssh.exec(machine.host, lastWalScript(remoteMember(this.options.baseDir, machine.cluster, machine.name)), { timeoutMs: 120_000 });
    if (result.code !== 0) throw new Error(`reading the write-ahead log of ${owner(machine)} on ${machine.host.address} failed: ${result.stderr.trim()}`);
    const encoded = result.stdout.trim();
    return encoded === '' ? undefined : lastCommitIn(gunzipSync(Buffer.from(encoded, 'base64')));
  }

  /** The lines a destructive script on a host of the cluster starts with (remote-scripts.ts, fenceLines). */
  fenceScript(cluster: string, fence: Fence): string[] {
    return fenceLines(fenceFile(this.options.baseDir, cluster), fence);
  }

  /** A script the host refused under its fence: this holder was deposed. */
  refusedByFence(machine: SshMachineOnHost, fence: Fence, result: ExecResult): void {
    if (fence === undefined || result.code !== FENCED) return;
    const seen = /fence=(\d+)/.exec(result.stderr)?.[1];
    if (seen !== undefined) throw new StaleFenceError(machine.cluster, `machine ${owner(machine)}`, fence, Number(seen));
  }

  private binDir(): string {
    return `${this.options.baseDir}/bin`;
  }
}

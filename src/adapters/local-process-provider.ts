import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, existsSync, openSync, readFileSync, readdirSync } from 'node:fs';
import { mkdir, readFile, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DurationRange } from '../api/duration.ts';
import { InvalidInputError } from '../api/errors.ts';
import { systemClock, type Clock } from '../ports/clock.ts';
import type { CreateMachineRequest, InfraProvider, MachineInfra, MemberLaunch } from '../ports/infra-provider.ts';
import type { TlsFiles } from '../ports/etcd-admin.ts';
import { findEtcdBinary } from './etcd-binaries.ts';
import { clientTlsFiles, memberTlsFiles } from './pki-files.ts';
import { isExiting, isProcessAlive, processArguments } from './process-status.ts';
import { restoreSnapshot } from './etcd-tools.ts';
import { sha256OfFile, withLock, writeFileAtomic } from './state-files.ts';

/**
 * Machines as local etcd processes (docs/architecture.md, "Local process provider"). A machine is a loopback
 * address `${addressPrefix}.${clusterSlot}.${ordinal}` with etcd on its standard ports 2379/2380, and a
 * folder `${stateDir}/clusters/<cluster>/machines/<name>/` holding `machine.json`, `data/`, `pki/` and
 * `etcd.log`. Everything the provider knows is in those files, so any later CLI process picks up where
 * the last one stopped: provisioning and deletion are deadlines in the file, not timers, and etcd runs
 * detached, tracked by PID.
 *
 * Members use mutual TLS (https client and peer URLs, client certificates required on both ports)
 * with the cluster's CA in `${stateDir}/clusters/<cluster>/pki/`, unless the provider is insecure.
 */

/**
 * Certificates are issued only when a machine is created or renewed; the x509 library behind them is
 * loaded then, not by every command that merely reads the provider's records (`status`).
 */
const loadPki = (): Promise<typeof import('./local-pki.ts')> => import('./local-pki.ts');

const CLIENT_PORT = 2379;
const PEER_PORT = 2380;
/** etcd 3.6's default: the log is compacted sooner, so a new learner gets a snapshot, not a long replay. */
const DEFAULT_SNAPSHOT_COUNT = 10_000;
const POLL_MS = 100;
const NAME = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/i;

export interface LocalProcessProviderOptions {
  stateDir: string;
  /** First two octets of every machine address (default '127.77'). */
  addressPrefix?: string;
  provisioningDelay?: DurationRange;
  deletionDelay?: DurationRange;
  /** Time for the machine timeline (readyAt, deleteAt); waits for real processes use real time. */
  clock?: Clock;
  random?: () => number;
  findBinary?: (version: string) => string;
  /** How long a member gets to exit after SIGTERM before SIGKILL (default 10 s). */
  stopGraceMs?: number;
  snapshotCount?: number;
  /** Plain http and no certificates for the machines it creates (debugging only); default false. */
  insecure?: boolean;
  /** Honour a machine's `provisioning-failed` marker file (a test hook; default false). */
  honourFailureMarker?: boolean;
  /** Where address-slot claims shared by every state dir on this host live (default: the OS temp dir). */
  claimsDir?: string;
}

interface MachineFile {
  cluster: string;
  name: string;
  ordinal: number;
  failureDomain?: string;
  address: string;
  clientURL: string;
  peerURL: string;
  createdAt: number;
  readyAt: number;
  pid?: number;
  version?: string;
  memberStartedAt?: number;
  deleting?: boolean;
  deleteAt?: number;
}

/** A machine as the provider's own file records it (epoch ms). */
export interface MachineFacts {
  name: string;
  clientURL: string;
  peerURL: string;
  createdAt: number;
  /** When the provider let the machine finish provisioning. */
  readyAt: number;
}

/** Fails with InvalidInputError when address:port cannot be bound (taken, or not a local address). */
export async function assertAddressFree(address: string, port: number): Promise<void> {
  const server = createServer();
  try {
    server.listen({ host: address, port, exclusive: true });
    await once(server, 'listening');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new InvalidInputError([`${address}:${String(port)} is not free (${code}); stop whatever uses it or pick another address`]);
  } finally {
    if (server.listening) await new Promise((resolve) => server.close(resolve));
  }
}

/** The recorded PID is still our etcd: alive, and its command line names this data dir (PID reuse). */
function isOurProcess(pid: number, dataDir: string): boolean {
  return isProcessAlive(pid) && processArguments(pid).includes(dataDir);
}

/** PIDs of live processes whose command line names this data dir (found by scanning /proc). */
function pidsUsing(dataDir: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => isOurProcess(pid, dataDir));
}

/**
 * Sends SIGTERM, waits up to graceMs, then SIGKILL; resolves once the process has exited, its ports
 * closed, so that a member started next on the same address can bind them.
 */
async function stopProcess(pid: number, dataDir: string, graceMs: number): Promise<void> {
  if (isOurProcess(pid, dataDir)) {
    signal(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (isOurProcess(pid, dataDir) && Date.now() < deadline) await sleep(POLL_MS);
    if (isOurProcess(pid, dataDir)) signal(pid, 'SIGKILL');
  }
  // Its command line empties before its sockets close (see isExiting).
  const killDeadline = Date.now() + 5000;
  while (isOurProcess(pid, dataDir) || isExiting(pid)) {
    if (Date.now() > killDeadline) throw new Error(`etcd process ${String(pid)} survived SIGKILL`);
    await sleep(POLL_MS / 5);
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

function versionAtLeast(version: string, major: number, minor: number): boolean {
  const [maj = 0, min = 0] = version.split('.').map(Number);
  return maj > major || (maj === major && min >= minor);
}

function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  return writeFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`);
}

export class LocalProcessProvider implements InfraProvider {
  private readonly stateDir: string;
  private readonly addressPrefix: string;
  private readonly provisioningDelay: DurationRange;
  private readonly deletionDelay: DurationRange;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly findBinary: (version: string) => string;
  private readonly stopGraceMs: number;
  private readonly snapshotCount: number;
  private readonly insecure: boolean;
  private readonly honourFailureMarker: boolean;
  private readonly claimsDir: string;

  constructor(options: LocalProcessProviderOptions) {
    this.stateDir = options.stateDir;
    this.addressPrefix = options.addressPrefix ?? '127.77';
    this.provisioningDelay = options.provisioningDelay ?? { minMs: 0, maxMs: 0 };
    this.deletionDelay = options.deletionDelay ?? { minMs: 0, maxMs: 0 };
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.findBinary = options.findBinary ?? findEtcdBinary;
    this.stopGraceMs = options.stopGraceMs ?? 10_000;
    this.snapshotCount = options.snapshotCount ?? DEFAULT_SNAPSHOT_COUNT;
    this.insecure = options.insecure ?? false;
    this.honourFailureMarker = options.honourFailureMarker ?? false;
    this.claimsDir = options.claimsDir ?? join(tmpdir(), 'fastplane-address-slots');
  }

  async create(request: CreateMachineRequest): Promise<MachineInfra> {
    const { cluster, name, ordinal } = request;
    checkName('cluster', cluster);
    checkName('machine', name);
    if (!Number.isInteger(ordinal) || ordinal < 1 || ordinal > 254) {
      throw new InvalidInputError([`machine ordinal ${String(ordinal)} is out of range 1..254 (local provider)`]);
    }
    const existing = await this.read(cluster, name);
    if (existing) return this.infra(existing);

    const slot = await this.slotFor(cluster);
    const address = `${this.addressPrefix}.${String(slot)}.${String(ordinal)}`;
    await assertAddressFree(address, CLIENT_PORT);
    await assertAddressFree(address, PEER_PORT);
    const createdAt = this.clock.now();
    const scheme = this.insecure ? 'http' : 'https';
    const machine: MachineFile = {
      cluster,
      name,
      ordinal,
      ...(request.failureDomain === undefined ? {} : { failureDomain: request.failureDomain }),
      address,
      clientURL: `${scheme}://${address}:${String(CLIENT_PORT)}`,
      peerURL: `${scheme}://${address}:${String(PEER_PORT)}`,
      createdAt,
      readyAt: createdAt + this.draw(this.provisioningDelay),
    };
    await mkdir(this.machineDir(cluster, name), { recursive: true });
    // Before machine.json: a machine on record always has its certificates.
    if (!this.insecure) await (await loadPki()).issueMemberCertificates(this.pkiDir(cluster), this.memberPkiDir(cluster, name), name, address);
    await this.write(machine);
    return { ...this.infra(machine), state: 'Provisioning' };
  }

  /** Reads only: a machine whose deletion is due is still described until `delete` finishes it. */
  async describe(cluster: string, name: string): Promise<MachineInfra | undefined> {
    const machine = await this.read(cluster, name);
    return machine && this.infra(machine);
  }

  async startMember(cluster: string, name: string, launch: MemberLaunch): Promise<void> {
    const machine = await this.read(cluster, name);
    if (!machine) throw new Error(`machine ${cluster}/${name} does not exist`);
    if (machine.deleting === true) throw new Error(`machine ${cluster}/${name} is being deleted`);
    if (this.clock.now() < machine.readyAt) throw new Error(`machine ${cluster}/${name} is still provisioning`);
    const dataDir = this.dataDir(cluster, name);
    if (machine.pid !== undefined && isOurProcess(machine.pid, dataDir)) return;
    // A crash between spawn and recording the PID leaves etcd running untracked: adopt it.
    const [adopted] = pidsUsing(dataDir);
    if (adopted !== undefined) {
      await this.write({ ...machine, pid: adopted, version: launch.version, memberStartedAt: this.clock.now() });
      return;
    }

    await this.restoreDataDir(machine, dataDir, launch);
    const binary = this.findBinary(launch.version);
    const log = openSync(join(this.machineDir(cluster, name), 'etcd.log'), 'a');
    try {
      // Detached, with its own log file and no pipe to us, so it outlives the CLI.
      const child = spawn(binary, this.args(machine, dataDir, launch), {
        detached: true,
        stdio: ['ignore', log, log],
        env: withoutEtcdVariables(),
      });
      await once(child, 'spawn');
      child.unref();
      if (child.pid === undefined) throw new Error(`etcd for ${cluster}/${name} did not start`);
      await this.write({ ...machine, pid: child.pid, version: launch.version, memberStartedAt: this.clock.now() });
    } finally {
      closeSync(log);
    }
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
    });
    await rename(staging, dataDir);
  }

  async stopMember(cluster: string, name: string): Promise<void> {
    const machine = await this.read(cluster, name);
    if (machine?.pid === undefined) return;
    await stopProcess(machine.pid, this.dataDir(cluster, name), this.stopGraceMs);
  }

  /**
   * Starts the teardown (stops the member, sets when the machine is gone) and, on a later call once
   * that time has come, wipes the machine: each call moves it on, and none blocks for the delay.
   */
  async delete(cluster: string, name: string): Promise<void> {
    let machine = await this.read(cluster, name);
    if (!machine) return;
    if (machine.deleting !== true) {
      // Marked first, so a crash while stopping still ends in a deleted machine.
      machine = { ...machine, deleting: true, deleteAt: this.clock.now() + this.draw(this.deletionDelay) };
      await this.write(machine);
      await this.stopMember(cluster, name);
    }
    if (this.clock.now() < (machine.deleteAt ?? 0)) return;
    if (machine.pid !== undefined) await stopProcess(machine.pid, this.dataDir(cluster, name), 0);
    await rm(this.machineDir(cluster, name), { recursive: true, force: true });
  }

  /**
   * `fastplane down`: kills every member process of the cluster by PID and removes its folder. SIGKILL
   * at once: the data goes anyway, and a leader stopped gracefully while its peers also stop spends
   * ~7 s trying to hand over leadership.
   */
  async destroyCluster(cluster: string): Promise<void> {
    checkName('cluster', cluster);
    const names = await this.machineNames(cluster);
    await Promise.all(
      names.map(async (name) => {
        const machine = await this.read(cluster, name);
        const dataDir = this.dataDir(cluster, name);
        const pids = new Set([...(machine?.pid === undefined ? [] : [machine.pid]), ...pidsUsing(dataDir)]);
        await Promise.all([...pids].map((pid) => stopProcess(pid, dataDir, 0)));
      }),
    );
    let slot: number | undefined;
    await this.withSlots((slots) => {
      slot = slots[cluster];
      return Object.fromEntries(Object.entries(slots).filter(([owner]) => owner !== cluster));
    });
    if (slot !== undefined && (await this.claimOwner(slot))?.stateDir === this.stateDir) await rm(this.claimPath(slot), { force: true });
    await rm(this.clusterDir(cluster), { recursive: true, force: true });
  }

  /** fastplane's client credentials for the cluster's members; undefined when insecure. */
  clientTls(cluster: string): TlsFiles | undefined {
    return this.insecure ? undefined : clientTlsFiles(this.pkiDir(cluster));
  }

  /** Every certificate file of the cluster: its CA, fastplane's client, each machine's server and peer. */
  async certificateFiles(cluster: string): Promise<string[]> {
    const members = (await this.machineNames(cluster)).flatMap((name) => {
      const files = memberTlsFiles(this.pkiDir(cluster), this.memberPkiDir(cluster, name));
      return [files.certFile, files.peerCertFile];
    });
    const client = clientTlsFiles(this.pkiDir(cluster));
    return [client.caFile, client.certFile, ...members].filter((file) => existsSync(file));
  }

  /** New server and peer certificates for a machine (its member must be stopped: etcd reads them per handshake). */
  async renewMemberCertificates(cluster: string, name: string): Promise<void> {
    const machine = await this.read(cluster, name);
    if (!machine) throw new Error(`machine ${cluster}/${name} does not exist`);
    await (await loadPki()).issueMemberCertificates(this.pkiDir(cluster), this.memberPkiDir(cluster, name), name, machine.address, { renew: true });
  }

  async renewClientCertificate(cluster: string): Promise<void> {
    await (await loadPki()).renewClientCertificate(this.pkiDir(cluster));
  }

  /** Names of the machines the provider holds for a cluster (including ones being deleted). */
  async machineNames(cluster: string): Promise<string[]> {
    const dir = join(this.clusterDir(cluster), 'machines');
    if (!existsSync(dir)) return [];
    return (await readdir(dir)).sort();
  }

  /**
   * What the provider itself recorded about each machine, read without side effects (describe may
   * finish a deletion): benchmarks take provisioning from the provider's own ready time, not from
   * when a reconcile pass happened to see it, and watch members by these URLs.
   */
  async machineFacts(cluster: string): Promise<MachineFacts[]> {
    const files = await Promise.all((await this.machineNames(cluster)).map((name) => this.read(cluster, name)));
    return files.flatMap((m) => (m === undefined ? [] : [{ name: m.name, clientURL: m.clientURL, peerURL: m.peerURL, createdAt: m.createdAt, readyAt: m.readyAt }]));
  }

  private args(machine: MachineFile, dataDir: string, launch: MemberLaunch): string[] {
    const args = [
      '--name', launch.memberName,
      '--data-dir', dataDir,
      '--listen-client-urls', machine.clientURL,
      '--advertise-client-urls', machine.clientURL,
      '--listen-peer-urls', machine.peerURL,
      '--initial-advertise-peer-urls', machine.peerURL,
      '--initial-cluster', launch.initialCluster,
      '--initial-cluster-state', launch.initialClusterState,
      '--initial-cluster-token', launch.clusterToken,
      '--snapshot-count', String(this.snapshotCount),
    ];
    // 3.4/3.5 know no such flag and would refuse to start.
    if (versionAtLeast(launch.version, 3, 6)) args.push('--max-learners', String(launch.maxLearners));
    if (launch.quotaBackendBytes !== undefined) args.push('--quota-backend-bytes', String(launch.quotaBackendBytes));
    // 3.4 defaults to the deprecated capnslog logger and warns about it; 3.5 already logs with zap.
    if (!versionAtLeast(launch.version, 3, 5)) args.push('--logger', 'zap', '--log-outputs', 'stderr');
    // The machine's URLs, fixed at creation, say whether it was created with certificates.
    if (machine.clientURL.startsWith('https:')) {
      const tls = memberTlsFiles(this.pkiDir(machine.cluster), this.memberPkiDir(machine.cluster, machine.name));
      args.push(
        '--cert-file', tls.certFile,
        '--key-file', tls.keyFile,
        '--trusted-ca-file', tls.caFile,
        '--client-cert-auth',
        '--peer-cert-file', tls.peerCertFile,
        '--peer-key-file', tls.peerKeyFile,
        '--peer-trusted-ca-file', tls.caFile,
        '--peer-client-cert-auth',
      );
    }
    return args;
  }

  /**
   * A machine whose folder holds a `provisioning-failed` file is reported Failed with the file's text,
   * the way a cloud API reports a failed instance: how users and chaos tests simulate that failure.
   */
  private provisioningFailure(machine: MachineFile): string | undefined {
    if (!this.honourFailureMarker) return undefined;
    const marker = join(this.machineDir(machine.cluster, machine.name), 'provisioning-failed');
    if (!existsSync(marker)) return undefined;
    return readFileSync(marker, 'utf8').trim() || 'provisioning failed';
  }

  private infra(machine: MachineFile): MachineInfra {
    const now = this.clock.now();
    const running = machine.pid !== undefined && isOurProcess(machine.pid, this.dataDir(machine.cluster, machine.name));
    const failure = machine.deleting === true ? undefined : this.provisioningFailure(machine);
    let state: MachineInfra['state'] = now >= machine.readyAt ? 'Provisioned' : 'Provisioning';
    if (failure !== undefined) state = 'Failed';
    if (machine.deleting === true) state = 'Deleting';
    return {
      name: machine.name,
      address: machine.address,
      clientURL: machine.clientURL,
      peerURL: machine.peerURL,
      state,
      memberRunning: running,
      ...(failure === undefined ? {} : { failureMessage: failure }),
      ...(machine.memberStartedAt === undefined ? {} : { memberStartedAt: machine.memberStartedAt }),
    };
  }

  private draw(range: DurationRange): number {
    return Math.round(range.minMs + this.random() * (range.maxMs - range.minMs));
  }

  private clusterDir(cluster: string): string {
    return join(this.stateDir, 'clusters', cluster);
  }

  private machineDir(cluster: string, name: string): string {
    return join(this.clusterDir(cluster), 'machines', name);
  }

  private dataDir(cluster: string, name: string): string {
    return join(this.machineDir(cluster, name), 'data');
  }

  private pkiDir(cluster: string): string {
    return join(this.clusterDir(cluster), 'pki');
  }

  private memberPkiDir(cluster: string, name: string): string {
    return join(this.machineDir(cluster, name), 'pki');
  }

  private async read(cluster: string, name: string): Promise<MachineFile | undefined> {
    try {
      return JSON.parse(await readFile(join(this.machineDir(cluster, name), 'machine.json'), 'utf8')) as MachineFile;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
  }

  private async write(machine: MachineFile): Promise<void> {
    await writeJsonAtomic(join(this.machineDir(machine.cluster, machine.name), 'machine.json'), machine);
  }

  /**
   * The cluster's slot (the third address octet): allocated once, kept in slots.json, and claimed
   * host-wide so that clusters of other state dirs on this host never get the same addresses.
   */
  private async slotFor(cluster: string): Promise<number> {
    // The cluster's folder exists before its claim: a claim whose folder is gone is stale.
    await mkdir(this.clusterDir(cluster), { recursive: true });
    let slot = 0;
    await this.withSlots(async (slots) => {
      const own = slots[cluster];
      if (own !== undefined && (await this.claim(own, cluster))) {
        slot = own;
        return slots;
      }
      const taken = new Set(Object.values(slots));
      for (let candidate = 1; candidate <= 254 && slot === 0; candidate++) {
        if (!taken.has(candidate) && (await this.claim(candidate, cluster))) slot = candidate;
      }
      if (slot === 0) throw new InvalidInputError(['all 254 cluster slots of the local provider are taken on this host; run `fastplane down` on old clusters']);
      return { ...slots, [cluster]: slot };
    });
    return slot;
  }

  private claimPath(slot: number): string {
    return join(this.claimsDir, `${this.addressPrefix}.${String(slot)}`);
  }

  private async claimOwner(slot: number): Promise<{ stateDir: string; cluster: string } | undefined> {
    try {
      return JSON.parse(await readFile(this.claimPath(slot), 'utf8')) as { stateDir: string; cluster: string };
    } catch {
      return undefined;
    }
  }

  /** Claims a slot for the cluster (exclusive create); a claim whose cluster folder is gone is taken over. */
  private async claim(slot: number, cluster: string): Promise<boolean> {
    await mkdir(this.claimsDir, { recursive: true, mode: 0o1777 });
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await writeFile(this.claimPath(slot), JSON.stringify({ stateDir: this.stateDir, cluster }), { flag: 'wx' });
        return true;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const owner = await this.claimOwner(slot);
      if (owner?.stateDir === this.stateDir && owner.cluster === cluster) return true;
      if (owner && existsSync(join(owner.stateDir, 'clusters', owner.cluster))) return false;
      await rm(this.claimPath(slot), { force: true });
    }
    return false;
  }

  /** Read-modify-write of slots.json under a lock file, since two CLI processes may create clusters at once. */
  private async withSlots(update: (slots: Record<string, number>) => Promise<Record<string, number>> | Record<string, number>): Promise<void> {
    const path = join(this.stateDir, 'provider', 'slots.json');
    await mkdir(dirname(path), { recursive: true });
    await withLock(`${path}.lock`, async () => {
      const slots = existsSync(path) ? (JSON.parse(await readFile(path, 'utf8')) as Record<string, number>) : {};
      await writeJsonAtomic(path, await update(slots));
    });
  }
}

function checkName(kind: string, name: string): void {
  // Names become folder names: no separators, no dot-dot.
  if (!NAME.test(name) || name.includes('..')) {
    throw new InvalidInputError([`${kind} name "${name}" must be 1-63 letters, digits, '.', '_' or '-', starting and ending with a letter or digit`]);
  }
}

/** etcd reads ETCD_* variables as flags; ours must not be overridden by the caller's environment. */
function withoutEtcdVariables(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('ETCD_')));
}

import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { drawDuration, type DurationRange } from '../../../api/duration.ts';
import { InvalidInputError } from '../../../api/errors.ts';
import { systemClock, type Clock } from '../../../ports/clock.ts';
import type { CommittedIndexReading, CreateMachineRequest, Fence, MachineComponents, MachineFacts, MachineInfra, MachineProvider, MemberLaunch } from '../../../ports/machine-provider.ts';
import { committedIndexOf } from '../../etcd/wal-commit.ts';
import { AddressSlots, type AddressClaims } from './local-address-slots.ts';
import { isOurProcess, pidsUsing, stopProcess } from '../../host/processes.ts';
import { dirBytes } from '../../host/dir-bytes.ts';
import type { EtcdProcess } from '../../host/etcd-component.ts';
import { readJsonIfPresent } from '../../state-files.ts';
import { MemoryStateStore } from '../../stores/memory-state-store.ts';
import { StoredClusterState, type DocumentStore } from '../../stored-cluster-state.ts';
import { underFence } from './local-fence.ts';
import { LocalMachineHomes } from './local-machine-homes.ts';
import { assertAddressFree, checkName, writeJsonAtomic, type MachineFile } from './local-machine.ts';
import { initStartSuppressed } from './test-markers.ts';
import { LocalEtcd, type LocalEtcdOptions } from './local-etcd.ts';
import { LocalKubernetes, type LocalMachineAccess } from './local-kubernetes.ts';
import { ComponentProvider, type ComponentProviderOptions } from '../component-provider.ts';
import { StackedKubernetesMachines } from '../stacked-kubernetes-machines.ts';
import { HaproxyEndpoint } from '../../endpoint/haproxy-endpoint.ts';
import { APISERVER_PORT } from '../../kubernetes/kubeconfig.ts';
import { stateScope } from '../provider-environment.ts';

/**
 * Machines as local etcd processes (docs/architecture.md, "Local process provider"). A machine is a loopback
 * address `${addressPrefix}.${clusterSlot}.${ordinal}` with etcd on its standard ports 2379/2380, and a
 * folder `${stateDir}/clusters/<cluster>/machines/<name>/` holding `machine.json`, `data/`, `pki/` and
 * `etcd.log` (on a Kubernetes control plane also each component's `.json` record, `.log` and
 * kubeconfig). Everything the provider knows is in those files, so any later CLI process picks up where
 * the last one stopped: provisioning and deletion are deadlines in the file, not timers, and etcd runs
 * detached, tracked by PID.
 *
 * Members use mutual TLS (https client and peer URLs, client certificates required on both ports)
 * with the cluster's CA in `${stateDir}/clusters/<cluster>/pki/`, unless the provider is insecure.
 */

/** Certificates are issued only at a machine's creation or renewal: the x509 library loads then, not for `status`. */

const CLIENT_PORT = 2379;
const PEER_PORT = 2380;

/** Besides these: the member settings (LocalEtcdOptions), insecure and the certificates' lifetime (ComponentProviderOptions). */
export interface LocalProcessProviderOptions extends LocalEtcdOptions, ComponentProviderOptions {
  stateDir: string;
  /** First two octets of every machine address (default '127.77'). */
  addressPrefix?: string;
  provisioningDelay?: DurationRange;
  deletionDelay?: DurationRange;
  /** Time for the machine timeline (readyAt, deleteAt); waits for real processes use real time. */
  clock?: Clock;
  random?: () => number;
  /** Honour the test marker files: a machine's `provisioning-failed`, a cluster's `init-never-starts` (default false). */
  honourFailureMarker?: boolean;
  /**
   * The record store: where address slots are claimed (local-address-slots.ts), the cluster's CA is
   * kept and each machine's home is recorded (local-machine-homes.ts), shared by every process that
   * uses it. Default: this process's own memory, for tests and tools.
   */
  store?: AddressClaims & DocumentStore;
}

export class LocalProcessProvider extends ComponentProvider implements MachineProvider {
  private readonly stateDir: string;
  private readonly store: AddressClaims & DocumentStore;
  private readonly homes: LocalMachineHomes;
  private readonly addressPrefix: string;
  private readonly provisioningDelay: DurationRange;
  private readonly deletionDelay: DurationRange;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly etcd: LocalEtcd;
  private readonly localKubernetes: LocalKubernetes;
  private readonly honourFailureMarker: boolean;
  private readonly slots: AddressSlots;
  /**
   * Its machines' Kubernetes components (local-kubernetes.ts) and one HAProxy per cluster as its
   * endpoint, on the block's own address `<prefix>.<slot>.0:6443` (no machine has ordinal 0), its
   * folder `<cluster>/endpoint/` beside the machines'.
   */
  readonly kubernetes = new StackedKubernetesMachines({
    components: (cluster, name, fence) => this.components(cluster, name, fence),
    machineAddress: async (cluster, name) => (await this.read(cluster, name))?.address,
    endpoint: async (cluster) => new HaproxyEndpoint({ dir: join(this.clusterDir(cluster), 'endpoint'), address: `${this.addressPrefix}.${String(await this.slots.slotFor(cluster))}.0:${String(APISERVER_PORT)}` }),
    kubeconfig: (cluster, server) => this.kubeconfig(cluster, server),
    renewClusterCertificates: (cluster, nextEtcdCa) => this.pki.renewKubernetesCluster(cluster, nextEtcdCa),
    renewMachineCertificates: async (cluster, name, endpointHost) => {
      const address = (await this.read(cluster, name))?.address;
      if (address === undefined) throw new Error(`machine ${cluster}/${name} has no address`);
      await this.pki.issueKubernetesMachine(cluster, name, address, endpointHost, true);
    },
  });

  constructor(options: LocalProcessProviderOptions) {
    super(options);
    this.stateDir = options.stateDir;
    this.addressPrefix = options.addressPrefix ?? '127.77';
    this.provisioningDelay = options.provisioningDelay ?? { minMs: 0, maxMs: 0 };
    this.deletionDelay = options.deletionDelay ?? { minMs: 0, maxMs: 0 };
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.etcd = new LocalEtcd(this.pki, options);
    this.localKubernetes = new LocalKubernetes(this.pki, options.stopGraceMs ?? 10_000);
    this.honourFailureMarker = options.honourFailureMarker ?? false;
    this.store = options.store ?? new MemoryStateStore();
    this.slots = new AddressSlots(this.stateDir, this.addressPrefix, this.store);
    this.homes = new LocalMachineHomes(this.stateDir);
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
    return this.fenced(cluster, name, request.fence, () => this.createHere(request));
  }

  private async createHere(request: CreateMachineRequest): Promise<MachineInfra> {
    const { cluster, name, ordinal } = request;
    const slot = await this.slots.slotFor(cluster);
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
    await mkdir(this.machineDir(cluster, name), { recursive: true, mode: 0o700 });
    // Before machine.json: a machine on record always has its certificates.
    if (!this.insecure) await this.pki.issueMember(cluster, name, address);
    await this.homes.record(this.state(cluster), machine);
    await this.write(machine);
    return { ...this.infra(machine), state: 'Provisioning' };
  }

  /** The data dir is on this host: read in place. */
  async committedIndexOffline(cluster: string, name: string): Promise<CommittedIndexReading> {
    const raftIndex = await committedIndexOf(this.dataDir(cluster, name));
    return raftIndex === undefined ? { kind: 'noData' } : { kind: 'index', raftIndex };
  }

  /** Reads only: a machine whose deletion is due is still described until `delete` finishes it. */
  async describe(cluster: string, name: string): Promise<MachineInfra | undefined> {
    const machine = await this.read(cluster, name);
    if (machine) {
      const infra = this.infra(machine);
      return infra.memberRunning ? { ...infra, memberDataBytes: await dirBytes(this.dataDir(cluster, name)) } : infra;
    }
    const elsewhere = await this.homes.elsewhere(this.state(cluster), name);
    return elsewhere && LocalMachineHomes.describe(elsewhere);
  }

  /** Provisioning here is a deadline in the machine's file: nothing to move on, it is described. */
  provision(cluster: string, name: string): Promise<MachineInfra | undefined> {
    return this.describe(cluster, name);
  }

  /** The etcd member, and the Kubernetes components stacked on it (local-kubernetes.ts). */
  override components(cluster: string, name: string, fence?: Fence): MachineComponents {
    return { ...super.components(cluster, name, fence), ...this.localKubernetes.components(this.access(cluster, name, fence)) };
  }

  private access(cluster: string, name: string, fence: Fence): LocalMachineAccess {
    return {
      cluster,
      name,
      clusterDir: this.clusterDir(cluster),
      machineDir: this.machineDir(cluster, name),
      read: () => this.read(cluster, name),
      startable: () => this.startable(cluster, name),
      fenced: (act) => this.fenced(cluster, name, fence, act),
    };
  }

  /** A local process, tracked by PID and recognised by its data dir in its command line. */
  protected etcdProcess(cluster: string, name: string, fence: Fence): EtcdProcess {
    return {
      start: (launch) => this.fenced(cluster, name, fence, () => this.startEtcd(cluster, name, launch)),
      stop: () => this.fenced(cluster, name, fence, () => this.stopEtcd(cluster, name)),
      running: async () => {
        const machine = await this.read(cluster, name);
        return machine !== undefined && this.isRunning(machine);
      },
      clientURL: async () => (await this.describe(cluster, name))?.clientURL,
    };
  }

  /** The machine, if a process may be started on it now. */
  private async startable(cluster: string, name: string): Promise<MachineFile> {
    const machine = await this.here(cluster, name);
    if (!machine) throw new Error(`machine ${cluster}/${name} does not exist`);
    if (machine.deleting === true) throw new Error(`machine ${cluster}/${name} is being deleted`);
    if (this.clock.now() < machine.readyAt) throw new Error(`machine ${cluster}/${name} is still provisioning`);
    return machine;
  }

  private async startEtcd(cluster: string, name: string, launch: MemberLaunch): Promise<void> {
    const machine = await this.startable(cluster, name);
    const dataDir = this.dataDir(cluster, name);
    if (machine.pid !== undefined && isOurProcess(machine.pid, dataDir)) return;
    // A crash between spawn and recording the PID leaves etcd running untracked: adopt it.
    const [adopted] = pidsUsing(dataDir);
    if (adopted !== undefined) {
      await this.write({ ...machine, pid: adopted, version: launch.version, memberStartedAt: this.clock.now() });
      return;
    }

    if (this.honourFailureMarker && launch.initialClusterState === 'new' && !existsSync(dataDir) && initStartSuppressed(this.clusterDir(cluster), name)) {
      await this.write({ ...machine, version: launch.version, memberStartedAt: this.clock.now() });
      return;
    }
    const pid = await this.etcd.spawn(machine, dataDir, join(this.machineDir(cluster, name), 'etcd.log'), launch);
    await this.write({ ...machine, pid, version: launch.version, memberStartedAt: this.clock.now() });
  }

  private async stopEtcd(cluster: string, name: string): Promise<void> {
    const machine = await this.here(cluster, name);
    if (machine?.pid === undefined) return;
    await this.etcd.stop(machine.pid, this.dataDir(cluster, name));
  }

  /**
   * Starts the teardown (stops the member, sets when the machine is gone) and, on a later call once
   * that time has come, wipes the machine: each call moves it on, and none blocks for the delay.
   */
  async delete(cluster: string, name: string, fence?: Fence): Promise<void> {
    if (await this.here(cluster, name)) await this.fenced(cluster, name, fence, () => this.tearDown(cluster, name, fence));
  }

  private async tearDown(cluster: string, name: string, fence: Fence): Promise<void> {
    let machine = await this.here(cluster, name);
    if (!machine) return;
    if (machine.deleting !== true) {
      // Marked first, so a crash while stopping still ends in a deleted machine.
      machine = { ...machine, deleting: true, deleteAt: this.clock.now() + this.draw(this.deletionDelay) };
      await this.write(machine);
      await this.localKubernetes.stopAll(this.access(cluster, name, fence));
      await this.stopEtcd(cluster, name);
    }
    if (this.clock.now() < (machine.deleteAt ?? 0)) return;
    await this.localKubernetes.stopAll(this.access(cluster, name, fence), 0);
    if (machine.pid !== undefined) await stopProcess(machine.pid, this.dataDir(cluster, name), 0);
    // Its certificates leave the store too: a machine given the freed name gets new keys from today's CA.
    await this.pki.forgetMember(cluster, name, () => rm(this.machineDir(cluster, name), { recursive: true, force: true }));
    await this.homes.forget(this.state(cluster), name);
  }

  /**
   * `fastplane down`: kills every member process of the cluster by PID and removes its folder. SIGKILL
   * at once: the data goes anyway, and a leader stopped gracefully while its peers also stop spends
   * ~7 s trying to hand over leadership.
   */
  async destroyCluster(cluster: string, fence?: Fence): Promise<void> {
    checkName('cluster', cluster);
    await this.fenced(cluster, undefined, fence, () => this.destroyHere(cluster, fence));
  }

  private async destroyHere(cluster: string, fence: Fence): Promise<void> {
    const names = await this.machineNames(cluster);
    // Before anything is stopped or forgotten: members this process cannot reach would run on, orphaned.
    for (const name of names) if (!(await this.read(cluster, name))) await this.here(cluster, name);
    await Promise.all(
      names.map(async (name) => {
        const machine = await this.read(cluster, name);
        const dataDir = this.dataDir(cluster, name);
        const pids = new Set([...(machine?.pid === undefined ? [] : [machine.pid]), ...pidsUsing(dataDir)]);
        await this.localKubernetes.stopAll(this.access(cluster, name, fence), 0);
        await Promise.all([...pids].map((pid) => stopProcess(pid, dataDir, 0)));
      }),
    );
    if (existsSync(join(this.clusterDir(cluster), 'endpoint'))) await (await this.kubernetes.endpoint(cluster)).stop();
    await this.slots.release(cluster);
    await this.state(cluster).drop();
  }

  /** New server and peer certificates for a machine (its member must be stopped: etcd reads them per handshake). */
  async renewMemberCertificates(cluster: string, name: string, fence?: Fence): Promise<void> {
    const machine = await this.here(cluster, name);
    if (!machine) throw new Error(`machine ${cluster}/${name} does not exist`);
    await this.fenced(cluster, name, fence, () => this.pki.issueMember(cluster, name, machine.address, true));
  }

  /** Local processes hold no connection: nothing to close. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  /** Names of the machines the provider holds for a cluster (including ones being deleted), here or elsewhere. */
  async machineNames(cluster: string): Promise<string[]> {
    const dir = join(this.clusterDir(cluster), 'machines');
    const here = existsSync(dir) ? await readdir(dir) : [];
    return [...new Set([...here, ...(await this.homes.names(this.state(cluster)))])].sort();
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
    const running = this.isRunning(machine);
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
      ...(state === 'Provisioning' ? { expectedReadyAt: machine.readyAt } : {}),
    };
  }

  private isRunning(machine: MachineFile): boolean {
    return machine.pid !== undefined && isOurProcess(machine.pid, this.dataDir(machine.cluster, machine.name));
  }

  private draw(range: DurationRange): number {
    return drawDuration(range, this.random);
  }

  protected underClusterFence<T>(cluster: string, fence: Fence, act: () => Promise<T>): Promise<T> {
    return this.fenced(cluster, undefined, fence, act);
  }
  /** A destructive act on a machine (none: the whole cluster) under the cluster's fence on this host: refused when a newer lease holder acted here. */
  private fenced<T>(cluster: string, name: string | undefined, fence: Fence, act: () => Promise<T>): Promise<T> {
    return underFence(join(this.clusterDir(cluster), 'fence'), cluster, name === undefined ? `control plane ${cluster}` : `machine ${cluster}/${name}`, fence, act);
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

  protected state(cluster: string): StoredClusterState {
    return new StoredClusterState(this.store, stateScope('local-process', cluster), this.clusterDir(cluster));
  }

  /** The machine when it lives here; a clear error when it lives in another state dir or on another host. */
  private async here(cluster: string, name: string): Promise<MachineFile | undefined> {
    const machine = await this.read(cluster, name);
    if (machine) return machine;
    const elsewhere = await this.homes.elsewhere(this.state(cluster), name);
    if (elsewhere) throw new Error(elsewhere.reason);
    return undefined;
  }

  private read(cluster: string, name: string): Promise<MachineFile | undefined> {
    return readJsonIfPresent<MachineFile>(join(this.machineDir(cluster, name), 'machine.json'));
  }

  private async write(machine: MachineFile): Promise<void> {
    await writeJsonAtomic(join(this.machineDir(machine.cluster, machine.name), 'machine.json'), machine);
  }
}

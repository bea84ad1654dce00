import { existsSync } from 'node:fs';
import { readdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { drawDuration, type DurationRange } from '../../../api/duration.ts';
import type { SshEndpoint, SshHost } from '../../../api/ssh-provider.ts';
import { StaleFenceError, type CommittedIndexReading, type CreateMachineRequest, type Fence, type MachineComponents, type MachineFacts, type MachineInfra, type MachineProvider } from '../../../ports/machine-provider.ts';
import type { StateStore } from '../../../ports/state-store.ts';
import { readJsonIfPresent } from '../../state-files.ts';
import { StoredClusterState, type DocumentStore } from '../../stored-cluster-state.ts';
import type { EtcdProcess } from '../../host/etcd-component.ts';
import { ComponentProvider } from '../component-provider.ts';
import { StackedKubernetesMachines } from '../stacked-kubernetes-machines.ts';
import { kubernetesCa, sshEndpoint } from './ssh-endpoint.ts';
import { SshKubernetes } from './ssh-kubernetes.ts';
import { stateScope } from '../provider-environment.ts';
import { runCreateHook, runHook } from './provision-hooks.ts';
import { CLIENT_PORT, PEER_PORT, SshEtcd, type MemberSeen } from './ssh-etcd.ts';
import { SshConnections, SshUnreachableError, type SshTarget } from './ssh-connections.ts';
import { hostKey, identity, MACHINE, machineKey, owner, type SshMachineFile } from './ssh-machine.ts';

/**
 * Machines on hosts you own, over SSH (README, "Your own machines"). A machine is one host from the
 * inventory, claimed in the state store so no two machines (of any cluster, any fastplane process
 * sharing the store) ever get the same host, or a host a provisioning hook created for it. What
 * fastplane knows of the cluster (each machine's record, the CA, the members' certificates) is in the
 * record store (StoredClusterState), so any fastplane process on any host sharing the store acts on
 * the same machines; `<stateDir>/clusters/<cluster>/` is only this host's copy of the files. What
 * runs is on the host under baseDir:
 * `bin/etcd-<version>`, `clusters/<cluster>/<name>/{data,pki,etcd.pid,started-at,etcd.log}` and
 * `fences/<cluster>` (the highest lease fence a call carried: lower ones are refused).
 *
 * Creating a machine does the slow work at once (hook, checks, binary copy, certificates) and reports
 * it Provisioned; many are created in parallel. A machine left Provisioning (a provisioning delay, no
 * free host, a crash) moves on only through `provision`: describing only reads, as status describes
 * beside a reconcile. A host that does not answer a describe gets its last seen state and the reason.
 */

export const HOST_POOL = 'ssh-hosts';

export interface SshProviderOptions {
  stateDir: string;
  hosts: SshHost[];
  identityFile: string;
  knownHostsFile: string;
  baseDir: string;
  /** The etcd binary on fastplane's side for a version. */
  findBinary: (version: string) => string;
  /** The spec's version: what a new machine's binary is (and what a create hook is told). */
  version: string;
  /** Host claims and the cluster's provider state. */
  store: Pick<StateStore, 'claim' | 'releaseClaim' | 'listClaims'> & DocumentStore;
  provision?: { create: string; delete?: string; timeoutMs: number };
  /** Slow infrastructure made visible: each machine waits this long before any host work (benchmarks). */
  provisioningDelay?: DurationRange;
  stopGraceMs?: number;
  /** A Kubernetes control plane's endpoint (spec.provider.endpoint); without it the machines run etcd only. */
  endpoint?: SshEndpoint;
}


export class SshProvider extends ComponentProvider implements MachineProvider {
  private readonly ssh: SshConnections;
  private readonly lastSeen = new Map<string, MemberSeen>();
  private readonly etcd: SshEtcd;
  private readonly sshKubernetes: SshKubernetes;
  /** The machines' Kubernetes components (ssh-kubernetes.ts) behind the manifest's endpoint (ssh-endpoint.ts). */
  readonly kubernetes?: StackedKubernetesMachines;

  constructor(private readonly options: SshProviderOptions) {
    super({});
    this.ssh = new SshConnections(options.identityFile, options.knownHostsFile);
    this.etcd = new SshEtcd(this.ssh, this.pki, options);
    this.sshKubernetes = new SshKubernetes(this.ssh, this.pki, this.etcd, options);
    const endpoint = options.endpoint;
    if (endpoint === undefined) return;
    this.kubernetes = new StackedKubernetesMachines({
      components: (cluster, name, fence) => this.components(cluster, name, fence),
      machineAddress: async (cluster, name) => (await this.read(cluster, name))?.host?.address,
      endpoint: (cluster) => sshEndpoint(endpoint, { ssh: this.ssh, baseDir: options.baseDir, state: (c) => this.state(c) }, cluster),
      kubeconfig: (cluster, server) => this.kubeconfig(cluster, server),
      renewClusterCertificates: (cluster, nextEtcdCa) => this.pki.renewKubernetesCluster(cluster, nextEtcdCa),
      renewMachineCertificates: async (cluster, name, endpointHost) => {
        const machine = await this.provisioned(cluster, name);
        await this.pki.issueKubernetesMachine(cluster, name, machine.host.address, endpointHost, true);
      },
    });
  }

  /** The etcd member, and on a Kubernetes control plane the components stacked on it, on the machine's host. */
  override components(cluster: string, name: string, fence?: Fence): MachineComponents {
    if (this.kubernetes === undefined) return super.components(cluster, name, fence);
    const onHost = async (): Promise<(SshMachineFile & { host: SshTarget }) | undefined> => {
      const machine = await this.read(cluster, name);
      return machine?.state === 'Provisioned' && machine.host !== undefined ? { ...machine, host: machine.host } : undefined;
    };
    const access = { cluster, name, fence, read: onHost, startable: () => this.provisioned(cluster, name), kubernetesCa: () => kubernetesCa(this.state(cluster)) };
    return { ...super.components(cluster, name, fence), ...this.sshKubernetes.components(access) };
  }

  async create(request: CreateMachineRequest): Promise<MachineInfra> {
    const { cluster, name } = request;
    const existing = await this.read(cluster, name);
    // A crash mid-provisioning leaves the record Provisioning: every step below is safe to repeat.
    if (existing && (existing.state !== 'Provisioning' || existing.deleting === true)) return this.describeFile(existing);
    const machine: SshMachineFile = existing ?? {
      cluster,
      name,
      ordinal: request.ordinal,
      ...(request.failureDomain === undefined ? {} : { failureDomain: request.failureDomain }),
      clientURL: '',
      peerURL: '',
      createdAt: Date.now(),
      state: 'Provisioning',
    };
    const delay = this.options.provisioningDelay;
    if (existing === undefined && delay !== undefined && delay.maxMs > 0) machine.readyAt = machine.createdAt + drawDuration(delay, Math.random);
    await this.write(machine);
    const outcome = await this.provisionFile(machine, request.fence);
    if (outcome instanceof Error) throw outcome;
    return this.describeFile(machine);
  }

  async provision(cluster: string, name: string, fence?: Fence): Promise<MachineInfra | undefined> {
    const machine = await this.read(cluster, name);
    if (!machine) return undefined;
    if (machine.state === 'Provisioning' && machine.deleting !== true) {
      const outcome = await this.provisionFile(machine, fence);
      if (outcome instanceof StaleFenceError) throw outcome;
    }
    return this.describeFile(machine);
  }

  /**
   * Moves a Provisioning machine on: a host (or stays Provisioning while every host is taken, as a
   * rollout's surge machine does until the machine it replaces gives its host back), then the checks,
   * the binary and the certificates. A host that does not answer is waited for, like a busy provider:
   * a partition between fastplane and its hosts is no reason to give a machine up. Any other failure
   * leaves it Failed with the reason, and is returned; a refusal by the host's fence (a newer lease
   * holder provisions it now) is returned with nothing written.
   */
  private async provisionFile(machine: SshMachineFile, fence: Fence): Promise<'Provisioned' | 'Waiting' | Error> {
    try {
      if (machine.readyAt !== undefined && Date.now() < machine.readyAt) return 'Waiting';
      if (machine.host === undefined) {
        const host = await this.acquireHost(machine);
        if (host === undefined) return await this.wait(machine, `waiting for a free host: all ${String(this.options.hosts.length)} of spec.provider.hosts are taken`);
        machine.host = host;
      }
      // On the host before anything is written: a deposed holder's late call stops here.
      await this.etcd.passFence({ ...machine, host: machine.host }, fence);
      machine.hooked = this.options.provision !== undefined;
      machine.clientURL = `https://${machine.host.address}:${String(CLIENT_PORT)}`;
      machine.peerURL = `https://${machine.host.address}:${String(PEER_PORT)}`;
      await this.write(machine);
      await this.etcd.checkHost(machine.host);
      await this.etcd.ensureBinary(machine.host, this.options.version);
      await this.etcd.installCertificates({ ...machine, host: machine.host }, false, fence);
      machine.state = 'Provisioned';
      machine.provisionedAt = Date.now();
      delete machine.failureMessage;
      delete machine.waiting;
      await this.write(machine);
      return 'Provisioned';
    } catch (error) {
      if (error instanceof StaleFenceError) return error;
      if (error instanceof SshUnreachableError) return this.wait(machine, `waiting for its host to answer: ${error.message}`);
      // On record as Failed with the reason: the planner replaces it, and delete gives its host back.
      machine.state = 'Failed';
      delete machine.waiting;
      machine.failureMessage = error instanceof Error ? error.message : String(error);
      await this.write(machine);
      return error instanceof Error ? error : new Error(String(error));
    }
  }

  /** Still Provisioning, with the reason on record for describe to report. */
  private async wait(machine: SshMachineFile, reason: string): Promise<'Waiting'> {
    machine.waiting = reason;
    await this.write(machine);
    return 'Waiting';
  }

  async describe(cluster: string, name: string): Promise<MachineInfra | undefined> {
    const machine = await this.read(cluster, name);
    return machine && this.describeFile(machine);
  }

  /** A command over ssh on the machine's host; the member is recognised there by its pidfile and data dir. */
  protected etcdProcess(cluster: string, name: string, fence: Fence): EtcdProcess {
    return {
      start: async (launch) => this.etcd.start(await this.provisioned(cluster, name), launch, fence),
      stop: async () => {
        const machine = await this.read(cluster, name);
        if (machine?.host !== undefined) await this.etcd.stop({ ...machine, host: machine.host }, fence);
      },
      running: async () => {
        const machine = await this.read(cluster, name);
        return machine?.state === 'Provisioned' && machine.host !== undefined && (await this.memberSeen(machine, machine.host)).memberRunning;
      },
      clientURL: async () => (await this.read(cluster, name))?.clientURL || undefined,
    };
  }

  /** Stops the member, wipes its files on the host, gives the host back; idempotent, each step once done stays done. */
  async delete(cluster: string, name: string, fence?: Fence): Promise<void> {
    const machine = await this.read(cluster, name);
    if (!machine) return;
    const { host } = machine;
    const target = host && { cluster, name, host };
    // A deposed holder's late deletion is refused by the host before the machine is marked.
    if (target) await this.onHostOf(machine, () => this.etcd.passFence(target, fence));
    if (machine.deleting !== true) await this.write({ ...machine, deleting: true });
    if (target) {
      // Its Kubernetes components first, as the planner drains a machine: none may outlive its member.
      if (this.kubernetes !== undefined) await this.onHostOf(machine, () => this.sshKubernetes.stopAll(target, fence, 0));
      await this.onHostOf(machine, () => this.etcd.wipe(target, fence));
      if (machine.hooked === true && this.options.provision?.delete !== undefined) {
        await runHook('delete', this.options.provision.delete, { ...this.hookRequest(machine), address: target.host.address }, this.options.provision.timeoutMs);
      }
      await this.options.store.releaseClaim(HOST_POOL, hostKey(target.host), owner(machine));
    }
    await this.pki.forgetMember(cluster, name, () => rm(this.machineDir(cluster, name), { recursive: true, force: true }));
    await this.state(cluster).deleteRecord(machineKey(name));
  }

  /** `fastplane down`: every machine of the cluster deleted, then its folder (and CA) removed. */
  async destroyCluster(cluster: string, fence?: Fence): Promise<void> {
    const results = await Promise.allSettled((await this.machineNames(cluster)).map((name) => this.delete(cluster, name, fence)));
    const failed = results.flatMap((r) => (r.status === 'rejected' ? [r.reason instanceof Error ? r.reason.message : String(r.reason)] : []));
    if (failed.length > 0) throw new Error(`could not remove every machine of ${cluster}: ${failed.join('; ')}`);
    if (this.kubernetes !== undefined) await (await this.kubernetes.endpoint(cluster)).stop();
    await this.state(cluster).drop();
    await this.ssh.close();
  }

  /** New server and peer certificates for a machine, issued here and written to its host (its member stopped). */
  async renewMemberCertificates(cluster: string, name: string, fence?: Fence): Promise<void> {
    const machine = await this.provisioned(cluster, name);
    await this.etcd.installCertificates(machine, true, fence);
  }

  async machineNames(cluster: string): Promise<string[]> {
    const stored = (await this.state(cluster).recordKeys(MACHINE)).map((key) => key.slice(MACHINE.length));
    // Machines of a version that kept their records on this host only, stored on their first read.
    const dir = join(this.options.stateDir, 'clusters', cluster, 'machines');
    const local = existsSync(dir) ? (await readdir(dir)).filter((name) => existsSync(join(dir, name, 'machine.json'))) : [];
    return [...new Set([...stored, ...local])].sort();
  }

  /** Machines once Provisioned, ready at that moment (the delay's end plus the host work). */
  async machineFacts(cluster: string): Promise<MachineFacts[]> {
    const files = await Promise.all((await this.machineNames(cluster)).map((name) => this.read(cluster, name)));
    return files.flatMap((m) => (m?.provisionedAt === undefined ? [] : [{ name: m.name, clientURL: m.clientURL, peerURL: m.peerURL, createdAt: m.createdAt, readyAt: m.provisionedAt }]));
  }

  close(): Promise<void> {
    return this.ssh.close();
  }

  /** The cluster's fence lives on its machines' hosts: each host that holds one passes it before the act. */
  protected async underClusterFence<T>(cluster: string, fence: Fence, act: () => Promise<T>): Promise<T> {
    if (fence !== undefined) {
      for (const name of await this.machineNames(cluster)) {
        const machine = await this.read(cluster, name);
        const host = machine?.host;
        if (machine !== undefined && host !== undefined) await this.onHostOf(machine, () => this.etcd.passFence({ cluster, name, host }, fence));
      }
    }
    return act();
  }

  /**
   * A step of a deletion on the machine's host. A machine that never got past provisioning never ran
   * a member: a host we cannot reach (or whose key we refuse) holds at most its files, and the next
   * machine there starts by wiping them. A fence's refusal always stands.
   */
  private async onHostOf(machine: SshMachineFile, step: () => Promise<void>): Promise<void> {
    try {
      await step();
    } catch (error) {
      if (error instanceof StaleFenceError || machine.state === 'Provisioned') throw error;
    }
  }

  private hookRequest(machine: SshMachineFile): { cluster: string; machine: string; version: string; failureDomain?: string } {
    return { cluster: machine.cluster, machine: machine.name, version: this.options.version, ...(machine.failureDomain === undefined ? {} : { failureDomain: machine.failureDomain }) };
  }

  /** The create hook's host, or a free host of the inventory (its failure domain first), claimed. */
  private async acquireHost(machine: SshMachineFile): Promise<SshTarget | undefined> {
    const me = owner(machine);
    if (this.options.provision !== undefined) {
      const answer = await runCreateHook(this.options.provision.create, this.hookRequest(machine), this.options.provision.timeoutMs);
      const host = { address: answer.address, port: answer.port, user: answer.user };
      if (!(await this.options.store.claim(HOST_POOL, hostKey(host), me))) throw new Error(`create hook answered ${hostKey(host)}, which another machine holds`);
      return host;
    }
    const claims = await this.options.store.listClaims(HOST_POOL);
    const mine = this.options.hosts.find((h) => claims.some((c) => c.key === hostKey(h) && c.owner === me));
    if (mine) return mine;
    const taken = new Set(claims.map((c) => c.key));
    const free = this.options.hosts.filter((h) => !taken.has(hostKey(h)));
    const ordered = [...free.filter((h) => h.failureDomain === machine.failureDomain), ...free.filter((h) => h.failureDomain !== machine.failureDomain)];
    for (const host of ordered) {
      if (await this.options.store.claim(HOST_POOL, hostKey(host), me)) return host;
    }
    return undefined;
  }

  private async describeFile(machine: SshMachineFile): Promise<MachineInfra> {
    const key = owner(machine);
    const base = identity(machine);
    if (machine.deleting === true) return { ...base, state: 'Deleting', memberRunning: this.lastSeen.get(key)?.memberRunning ?? false };
    if (machine.state === 'Provisioning') {
      const expected = machine.readyAt !== undefined && machine.readyAt > Date.now() ? { expectedReadyAt: machine.readyAt } : {};
      return { ...base, state: 'Provisioning', memberRunning: false, ...expected, ...(machine.waiting === undefined ? {} : { failureMessage: machine.waiting }) };
    }
    if (machine.state !== 'Provisioned' || machine.host === undefined) {
      return { ...base, state: machine.state, memberRunning: false, ...(machine.failureMessage === undefined ? {} : { failureMessage: machine.failureMessage }) };
    }
    let seen: MemberSeen;
    let unreachable: string | undefined;
    try {
      seen = await this.memberSeen(machine, machine.host);
    } catch (error) {
      if (!(error instanceof SshUnreachableError)) throw error;
      // Not knowing is not "stopped": a host cut off from fastplane keeps what was last seen, so a
      // partition alone never looks like a learner that exited.
      unreachable = error.message;
      seen = this.lastSeen.get(key) ?? { memberRunning: true };
    }
    return { ...base, state: 'Provisioned', ...seen, ...(unreachable === undefined ? {} : { unreachable }) };
  }

  /** Read on the machine's host; a host that does not answer may hold newer data than any read. */
  async committedIndexOffline(cluster: string, name: string): Promise<CommittedIndexReading> {
    const machine = await this.read(cluster, name);
    if (machine?.host === undefined) return { kind: 'noData' };
    try {
      const raftIndex = await this.etcd.committedIndex({ cluster, name, host: machine.host });
      return raftIndex === undefined ? { kind: 'noData' } : { kind: 'index', raftIndex };
    } catch (error) {
      if (error instanceof SshUnreachableError) return { kind: 'unreachable', reason: error.message };
      throw error;
    }
  }

  /** Whether the member runs on its host now, and since when; remembered for a describe that cannot reach the host. */
  private async memberSeen(machine: SshMachineFile, host: SshTarget): Promise<MemberSeen> {
    const seen = await this.etcd.seen({ cluster: machine.cluster, name: machine.name, host });
    this.lastSeen.set(owner(machine), seen);
    return seen;
  }

  private async provisioned(cluster: string, name: string): Promise<SshMachineFile & { host: SshTarget }> {
    const machine = await this.read(cluster, name);
    if (!machine) throw new Error(`machine ${cluster}/${name} does not exist`);
    if (machine.deleting === true) throw new Error(`machine ${cluster}/${name} is being deleted`);
    if (machine.state !== 'Provisioned' || machine.host === undefined) throw new Error(`machine ${cluster}/${name} is not provisioned`);
    return { ...machine, host: machine.host };
  }

  private machineDir(cluster: string, name: string): string {
    return join(this.options.stateDir, 'clusters', cluster, 'machines', name);
  }

  protected state(cluster: string): StoredClusterState {
    return new StoredClusterState(this.options.store, stateScope('ssh', cluster), join(this.options.stateDir, 'clusters', cluster));
  }

  private async read(cluster: string, name: string): Promise<SshMachineFile | undefined> {
    const stored = await this.state(cluster).readRecord<SshMachineFile>(machineKey(name));
    if (stored) return stored;
    // A record a version that kept them on this host left: stored now, then only the store's is read.
    const legacyFile = join(this.machineDir(cluster, name), 'machine.json');
    const legacy = await readJsonIfPresent<SshMachineFile>(legacyFile);
    if (!legacy) return undefined;
    await this.write(legacy);
    await rm(legacyFile, { force: true });
    return legacy;
  }

  private write(machine: SshMachineFile): Promise<void> {
    return this.state(machine.cluster).writeRecord(machineKey(machine.name), machine);
  }
}

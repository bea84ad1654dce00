import { readFile } from 'node:fs/promises';
import { KUBERNETES_COMPONENTS, type Fence, type KubernetesComponent, type KubernetesLaunch, type MachineComponent } from '../../../ports/machine-provider.ts';
import { kubernetesComponent, type KubernetesProcess } from '../../host/kubernetes-component.ts';
import { componentMarker, KUBERNETES_PORTS, kubernetesFlags } from '../../host/kubernetes-flags.ts';
import { findKubernetesProgram } from '../../kubernetes/kubernetes-binaries.ts';
import { componentKubeconfig, hostOf } from '../../kubernetes/kubeconfig.ts';
import type { ClusterPki } from '../../pki/cluster-pki.ts';
import { kubernetesFiles, type KubernetesFiles } from '../../pki/pki-files.ts';
import { ensureRemoteCopy, writeRemoteFiles, type RemoteFile } from './remote-files.ts';
import { processScript, remoteMember, startScript, stopScript, type RemoteProcess } from './remote-scripts.ts';
import type { SshConnections } from './ssh-connections.ts';
import type { SshEtcd, SshMachineOnHost, SshMember } from './ssh-etcd.ts';

/** One of the provider's machines, as its Kubernetes components need to see it. */
export interface SshMachineAccess {
  cluster: string;
  name: string;
  /** The cluster's Kubernetes CA certificate on this host, which the apiserver's is checked against. */
  kubernetesCa(): Promise<string>;
  fence: Fence;
  /** The machine on its host, when it has one. */
  read(): Promise<SshMember | undefined>;
  /** The machine, checked to be provisioned and not being deleted; throws otherwise. */
  startable(): Promise<SshMember>;
}

export type SshKubernetesComponents = { readonly [K in KubernetesComponent]: MachineComponent<K> };

/** The files a machine's components read, as `kubernetesFiles` names them; client keys stay in the kubeconfigs. */
function shipped(files: KubernetesFiles): [string, number][] {
  return [
    [files.ca.cert, 0o644],
    [files.caSigner, 0o644],
    [files.ca.key, 0o600],
    [files.frontProxyCa.cert, 0o644],
    [files.frontProxyClient.cert, 0o644],
    [files.frontProxyClient.key, 0o600],
    [files.serviceAccount.key, 0o600],
    [files.serviceAccount.pub, 0o644],
    [files.etcdCa, 0o644],
    [files.apiserverEtcdClient.cert, 0o644],
    [files.apiserverEtcdClient.key, 0o600],
    [files.apiserver.cert, 0o644],
    [files.apiserver.key, 0o600],
  ];
}

/**
 * The ssh provider's Kubernetes components: processes on the machine's host, started detached over
 * SSH like its etcd member, tracked by the PID in their pidfile and recognised by the argument only
 * they have (kubernetes-flags.ts). Everything a component reads (its program, the machine's
 * certificates and keys, its kubeconfig) is written to the host again at each start, from the record
 * store, under `<machine>/kubernetes/` on the host (kubeadm's file names below it), so it goes with
 * the machine's folder when the machine is wiped.
 */
export class SshKubernetes {
  constructor(
    private readonly ssh: SshConnections,
    private readonly pki: ClusterPki,
    private readonly etcd: SshEtcd,
    private readonly options: { baseDir: string; stopGraceMs?: number | undefined },
  ) {}

  components(machine: SshMachineAccess): SshKubernetesComponents {
    return {
      'kube-apiserver': kubernetesComponent('kube-apiserver', this.process(machine, 'kube-apiserver')),
      'kube-controller-manager': kubernetesComponent('kube-controller-manager', this.process(machine, 'kube-controller-manager')),
      'kube-scheduler': kubernetesComponent('kube-scheduler', this.process(machine, 'kube-scheduler')),
    };
  }

  /** Every component of the machine stopped, scheduler first, in one command (the host's fence checked first). */
  async stopAll(machine: SshMachineOnHost, fence: Fence, graceMs = this.options.stopGraceMs ?? 10_000): Promise<void> {
    const stops = [...KUBERNETES_COMPONENTS].reverse().map((kind) => `(\n${stopScript(this.remote(machine, kind), graceMs, [])}\n)`);
    const result = await this.ssh.exec(machine.host, [...this.etcd.fenceScript(machine.cluster, fence), ...stops].join('\n'), { timeoutMs: 3 * graceMs + 30_000 });
    this.etcd.refusedByFence(machine, fence, result);
    if (result.code !== 0) throw new Error(`stopping the Kubernetes components of ${machine.cluster}/${machine.name} on ${machine.host.address} failed: ${result.stderr.trim()}`);
  }

  /** The machine's Kubernetes folder on its host: kubeadm's layout of the cluster's files below it. */
  private root(machine: { cluster: string; name: string }): string {
    return `${remoteMember(this.options.baseDir, machine.cluster, machine.name).dir}/kubernetes`;
  }

  private remote(machine: { cluster: string; name: string }, kind: KubernetesComponent): RemoteProcess & { kubeconfig: string; files: KubernetesFiles } {
    const dir = this.root(machine);
    const files = kubernetesFiles(dir, machine.name);
    const kubeconfig = `${dir}/${kind}.conf`;
    return { dir, files, kubeconfig, marker: componentMarker(kind, { files, kubeconfig }), pidFile: `${dir}/${kind}.pid`, startedAtFile: `${dir}/${kind}.started-at`, logFile: `${dir}/${kind}.log` };
  }

  private process(access: SshMachineAccess, kind: KubernetesComponent): KubernetesProcess {
    const seen = async (): Promise<{ running: boolean; exe?: string }> => {
      const machine = await access.read();
      if (machine === undefined) return { running: false };
      const result = await this.ssh.exec(machine.host, processScript(this.remote(machine, kind)), { timeoutMs: 5_000 });
      const fields = Object.fromEntries(result.stdout.split('\n').map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]));
      return { running: fields.running === '1', ...(fields.exe === undefined ? {} : { exe: fields.exe }) };
    };
    return {
      start: (launch) => this.start(access, kind, launch),
      stop: async () => {
        const machine = await access.read();
        if (machine !== undefined) await this.stop(machine, kind, access.fence);
      },
      running: async () => (await seen()).running,
      url: async () => {
        const machine = await access.read();
        return machine === undefined ? undefined : `https://${machine.host.address}:${String(KUBERNETES_PORTS[kind])}`;
      },
      // The controller-manager and the scheduler serve with a certificate they make themselves in memory.
      probeTls: async () => (kind === 'kube-apiserver' ? { kind: 'ca', caFile: await access.kubernetesCa() } : { kind: 'unverified' }),
      // The program on the host is named after its version when it is copied there (`<component>-<version>`).
      programVersion: async () => /-(\d+\.\d+\.\d+)(?: \(deleted\))?$/.exec((await seen()).exe ?? '')?.[1],
    };
  }

  private async start(access: SshMachineAccess, kind: KubernetesComponent, launch: KubernetesLaunch): Promise<void> {
    const machine = await access.startable();
    const { host } = machine;
    const remote = this.remote(machine, kind);
    const program = await ensureRemoteCopy(this.ssh, host, findKubernetesProgram(kind, launch.version, launch.binaries), `${this.options.baseDir}/bin/${kind}-${launch.version}`);
    const local = await this.pki.issueKubernetesMachine(machine.cluster, machine.name, host.address, launch.endpoint === undefined ? undefined : hostOf(launch.endpoint));
    const remoteFiles = shipped(remote.files);
    const files: RemoteFile[] = await Promise.all(shipped(local).map(async ([path, mode], i) => ({ path: remoteFiles[i]?.[0] ?? '', mode, content: await readFile(path) })));
    if (kind !== 'kube-apiserver') files.push({ path: remote.kubeconfig, mode: 0o600, content: Buffer.from(await componentKubeconfig(machine.cluster, kind, host.address, local)) });
    // Before any file is rewritten: a deposed holder's late start must not put back old ones.
    await this.etcd.passFence(machine, access.fence);
    await writeRemoteFiles(this.ssh, host, files);
    const args = kubernetesFlags(kind, { cluster: machine.cluster, address: host.address, etcdClientURL: machine.clientURL, files: remote.files, kubeconfig: remote.kubeconfig });
    const result = await this.ssh.exec(host, startScript(remote, program, args, this.etcd.fenceScript(machine.cluster, access.fence)));
    this.etcd.refusedByFence(machine, access.fence, result);
    if (result.code !== 0) throw new Error(`starting ${kind} on ${host.address} failed: ${result.stderr.trim()}`);
  }

  private async stop(machine: SshMember, kind: KubernetesComponent, fence: Fence): Promise<void> {
    const graceMs = this.options.stopGraceMs ?? 10_000;
    const result = await this.ssh.exec(machine.host, stopScript(this.remote(machine, kind), graceMs, this.etcd.fenceScript(machine.cluster, fence)), { timeoutMs: graceMs + 30_000 });
    this.etcd.refusedByFence(machine, fence, result);
    if (result.code !== 0) throw new Error(`stopping ${kind} on ${machine.host.address} failed: ${result.stderr.trim()}`);
  }
}

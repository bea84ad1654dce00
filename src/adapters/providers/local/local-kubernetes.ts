import { readlink } from 'node:fs/promises';
import { join } from 'node:path';
import { KUBERNETES_COMPONENTS, type KubernetesComponent, type KubernetesLaunch, type MachineComponent } from '../../../ports/machine-provider.ts';
import { kubernetesComponent, type KubernetesProcess } from '../../host/kubernetes-component.ts';
import { componentMarker, KUBERNETES_PORTS, kubernetesFlags } from '../../host/kubernetes-flags.ts';
import { isOurProcess, pidsUsing, spawnDetached, stopProcess } from '../../host/processes.ts';
import { findKubernetesProgram, programVersion } from '../../kubernetes/kubernetes-binaries.ts';
import { componentKubeconfig, hostOf } from '../../kubernetes/kubeconfig.ts';
import type { ClusterPki } from '../../pki/cluster-pki.ts';
import { kubernetesFiles } from '../../pki/pki-files.ts';
import { readJsonIfPresent, writeFileAtomic } from '../../state-files.ts';
import { writeJsonAtomic, type MachineFile } from './local-machine.ts';

/** One of the provider's machines, as the Kubernetes components need to see it. */
export interface LocalMachineAccess {
  cluster: string;
  name: string;
  /** The cluster's folder, the record store's copy on this host: where the certificates are. */
  clusterDir: string;
  machineDir: string;
  /** The machine as recorded, when it lives here. */
  read(): Promise<MachineFile | undefined>;
  /** The machine, checked to exist here, be provisioned and not being deleted; throws otherwise. */
  startable(): Promise<MachineFile>;
  /** Runs a start or a stop under the cluster's fence on this host: refused when a newer lease holder acted on the cluster here. */
  fenced<T>(act: () => Promise<T>): Promise<T>;
}

/** What the provider records of a started component, in `<machine>/<component>.json`. */
interface ComponentRecord {
  pid: number;
  version: string;
}

export type KubernetesComponents = { readonly [K in KubernetesComponent]: MachineComponent<K> };

/**
 * The local provider's Kubernetes components: processes of this host, on the machine's loopback
 * address, started detached like its etcd member and tracked by PID. A component's files (its
 * certificates, its kubeconfig) are made again from the record store at each start, so nothing of
 * them lives only here.
 */
export class LocalKubernetes {
  constructor(
    private readonly pki: ClusterPki,
    /** How long a component gets to exit after SIGTERM before SIGKILL. */
    private readonly stopGraceMs: number,
  ) {}

  components(machine: LocalMachineAccess): KubernetesComponents {
    return {
      'kube-apiserver': kubernetesComponent('kube-apiserver', this.process(machine, 'kube-apiserver')),
      'kube-controller-manager': kubernetesComponent('kube-controller-manager', this.process(machine, 'kube-controller-manager')),
      'kube-scheduler': kubernetesComponent('kube-scheduler', this.process(machine, 'kube-scheduler')),
    };
  }

  /** Stops every Kubernetes component of the machine, the reverse of their start order (under the fence its caller holds). */
  async stopAll(machine: LocalMachineAccess, graceMs = this.stopGraceMs): Promise<void> {
    for (const kind of [...KUBERNETES_COMPONENTS].reverse()) await this.stopComponent(machine, kind, graceMs);
  }

  private process(machine: LocalMachineAccess, kind: KubernetesComponent): KubernetesProcess {
    const record = (): Promise<ComponentRecord | undefined> => readJsonIfPresent<ComponentRecord>(join(machine.machineDir, `${kind}.json`));
    const runningPid = async (): Promise<number | undefined> => {
      const pid = (await record())?.pid;
      return pid !== undefined && isOurProcess(pid, marker(machine, kind)) ? pid : undefined;
    };
    return {
      start: (launch) => machine.fenced(async () => this.start(machine, kind, launch, (await runningPid()) !== undefined)),
      stop: () => machine.fenced(() => this.stopComponent(machine, kind, this.stopGraceMs)),
      running: async () => (await runningPid()) !== undefined,
      url: async () => {
        const address = (await machine.read())?.address;
        return address === undefined ? undefined : `https://${address}:${String(KUBERNETES_PORTS[kind])}`;
      },
      // The controller-manager and the scheduler serve with a certificate they make themselves in memory.
      probeTls: () => Promise.resolve(kind === 'kube-apiserver' ? { kind: 'ca', caFile: kubernetesFiles(machine.clusterDir, machine.name).ca.cert } : { kind: 'unverified' }),
      programVersion: async () => {
        const pid = await runningPid();
        // It may exit between the check and the read.
        const program = pid === undefined ? undefined : await readlink(`/proc/${String(pid)}/exe`).catch(() => undefined);
        return program === undefined ? undefined : programVersion(program);
      },
    };
  }

  private async start(machine: LocalMachineAccess, kind: KubernetesComponent, launch: KubernetesLaunch, running: boolean): Promise<void> {
    if (running) return;
    const file = await machine.startable();
    const recordFile = join(machine.machineDir, `${kind}.json`);
    // A crash between spawn and recording the PID leaves the component running untracked: adopt it.
    const [adopted] = pidsUsing(marker(machine, kind));
    if (adopted !== undefined) {
      await writeJsonAtomic(recordFile, { pid: adopted, version: launch.version } satisfies ComponentRecord);
      return;
    }
    const program = findKubernetesProgram(kind, launch.version, launch.binaries);
    const files = await this.pki.issueKubernetesMachine(machine.cluster, machine.name, file.address, launch.endpoint === undefined ? undefined : hostOf(launch.endpoint));
    const kubeconfig = join(machine.machineDir, `${kind}.conf`);
    if (kind !== 'kube-apiserver') {
      await writeFileAtomic(kubeconfig, await componentKubeconfig(machine.cluster, kind, file.address, files), 0o600);
    }
    const args = kubernetesFlags(kind, { cluster: machine.cluster, address: file.address, etcdClientURL: file.clientURL, files, kubeconfig });
    const pid = await spawnDetached(program, args, join(machine.machineDir, `${kind}.log`));
    await writeJsonAtomic(recordFile, { pid, version: launch.version } satisfies ComponentRecord);
  }

  /** The recorded process and any untracked one of the same component, stopped. */
  private async stopComponent(machine: LocalMachineAccess, kind: KubernetesComponent, graceMs: number): Promise<void> {
    const recorded = (await readJsonIfPresent<ComponentRecord>(join(machine.machineDir, `${kind}.json`)))?.pid;
    const pids = new Set([...(recorded === undefined ? [] : [recorded]), ...pidsUsing(marker(machine, kind))]);
    await Promise.all([...pids].map((pid) => stopProcess(pid, marker(machine, kind), graceMs)));
  }
}

/** The argument only this component of this machine has on its command line (kubernetes-flags.ts). */
function marker(machine: LocalMachineAccess, kind: KubernetesComponent): string {
  return componentMarker(kind, { files: kubernetesFiles(machine.clusterDir, machine.name), kubeconfig: join(machine.machineDir, `${kind}.conf`) });
}

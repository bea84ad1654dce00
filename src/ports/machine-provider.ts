import type { TlsFiles } from './etcd-admin.ts';
import type { SnapshotSource } from '../domain/machine.ts';
import { FencedOutError } from './state-store.ts';

/**
 * The fencing number of the lease a destructive call is made under (LeaseRecord.fence). The machine
 * itself keeps the highest number it was called with and checks it right before it acts: a lower one
 * (a deposed holder's call still in flight) is refused with StaleFenceError and changes nothing.
 * Undefined: a call made under no lease (benchmarks, tools), which is not checked.
 */
export type Fence = number | undefined;

/** A destructive call refused by the machine: a newer lease holder has acted on it since. */
export class StaleFenceError extends FencedOutError {
  /** `target`: what refused, `machine <cluster>/<name>` or `control plane <cluster>`. */
  constructor(cluster: string, target: string, fence: number, seen: number) {
    super(cluster);
    this.message = `${target} refused a call under lease fence ${String(fence)}: a newer holder (fence ${String(seen)}) has acted on it; this process no longer holds the lease`;
  }
}

/**
 * Where machines come from. Creation and deletion return at once; the machine's state then moves on by
 * itself (provisioning takes minutes on real infrastructure) and `describe` reports where it is. That
 * keeps slow work off the reconcile loop and lets many machines provision in parallel. `describe` only
 * reads (status runs it beside a reconcile); `provision` is what moves a Provisioning machine on.
 */
export type InfraState = 'Provisioning' | 'Provisioned' | 'Failed' | 'Deleting';

export interface MachineInfra {
  name: string;
  /** The machine's own address; its member listens on address:2379 (clients) and :2380 (peers). */
  address: string;
  clientURL: string;
  peerURL: string;
  state: InfraState;
  failureMessage?: string;
  /** Whether the machine's etcd process is running now. */
  memberRunning: boolean;
  /** When the member process was last started (ms since epoch). */
  memberStartedAt?: number;
  /**
   * Bytes in the running member's data dir: they grow while a learner receives its snapshot, which etcd
   * writes to a file as it arrives (its metrics count the bytes only once the snapshot is whole).
   */
  memberDataBytes?: number;
  /**
   * Set when the provider could not reach the machine just now (a remote host): the other fields are
   * then what it last saw, not news.
   */
  unreachable?: string;
  /** While Provisioning, when the provider expects the machine ready, if it knows (a hint, not a promise). */
  expectedReadyAt?: number;
}

export interface MemberLaunch {
  /** For a new cluster only: restore this snapshot into the empty data dir before the first start. */
  restoreFrom?: SnapshotSource;
  /** etcd --name */
  memberName: string;
  version: string;
  /** etcd --initial-cluster, built from a fresh member list (or just this member for init). */
  initialCluster: string;
  initialClusterState: 'new' | 'existing';
  clusterToken: string;
  maxLearners: number;
  quotaBackendBytes?: number;
  /** false: etcd --strict-reconfig-check=false (fastplane makes the checks itself). Default true. */
  strictReconfigCheck?: boolean;
  /**
   * `fastplane recover` only: this one start rewrites the member's data dir into a one-member cluster
   * (etcd --force-new-cluster). Later starts never carry it.
   */
  forceNewCluster?: boolean;
}

/**
 * What starts one of a machine's Kubernetes components (kubeadm's stacked topology): the version of
 * its program, and where the control-plane endpoint is. kube-apiserver talks to the machine's own etcd
 * member; kube-controller-manager and kube-scheduler to the machine's own apiserver.
 */
export interface KubernetesLaunch {
  /** Without the `v`: `1.36.3`. */
  version: string;
  /** A directory holding the programs of `version` (spec.kubernetes.binaries); default the installed ones. */
  binaries?: string;
  /**
   * `host` or `host:port` of the control-plane endpoint (ControlPlaneEndpoint.address) when it is known:
   * the apiserver's serving certificate names its address, so clients reach the apiserver through it.
   */
  endpoint?: string;
}

/**
 * The parts a machine is made of, each with what starts it: its etcd member, and on a Kubernetes
 * control plane kube-apiserver, kube-controller-manager and kube-scheduler stacked on it.
 */
export interface ComponentLaunches {
  etcd: MemberLaunch;
  'kube-apiserver': KubernetesLaunch;
  'kube-controller-manager': KubernetesLaunch;
  'kube-scheduler': KubernetesLaunch;
}

/** The Kubernetes components, in the order a machine starts them (and stops them in reverse). */
export const KUBERNETES_COMPONENTS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const;
export type KubernetesComponent = (typeof KUBERNETES_COMPONENTS)[number];

export type ComponentKind = keyof ComponentLaunches;

/** What a component's own health check answered, beside whether its process runs. */
export interface ComponentHealth {
  running: boolean;
  /** Running and its health endpoint said healthy. */
  healthy: boolean;
  /** Why it is not healthy, when it is not. */
  reason?: string;
}

/** One component of a machine, reached through the machine's provider wherever the machine is. */
export interface MachineComponent<K extends ComponentKind> {
  readonly kind: K;
  /** Idempotent: a component that already runs is left running. */
  start(launch: ComponentLaunches[K]): Promise<void>;
  /** Idempotent; resolves once the process is gone and its ports are free. */
  stop(): Promise<void>;
  health(): Promise<ComponentHealth>;
  /** The version the running process reports; undefined when it does not answer. */
  version(): Promise<string | undefined>;
}

/**
 * A machine's components by kind: always its etcd member; the Kubernetes components where the provider
 * can run them (a provider without them refuses a spec with `kubernetes`).
 */
export type MachineComponents = { readonly etcd: MachineComponent<'etcd'> } & { readonly [K in KubernetesComponent]?: MachineComponent<K> };

/** One apiserver the endpoint may route to. */
export interface EndpointBackend {
  machine: string;
  /** host:port of the machine's kube-apiserver. */
  address: string;
}

/**
 * The control-plane endpoint of a Kubernetes control plane: one address (kubeadm's
 * controlPlaneEndpoint) in front of the machines' apiservers, as kubeadm's HA guide builds it with
 * HAProxy. fastplane says which apiservers it routes to; the endpoint health-checks each (`/readyz`) and
 * routes only to the ones that answer.
 */
export interface ControlPlaneEndpoint {
  /** host:port clients use. */
  readonly address: string;
  /** Routes to exactly these backends from now on (started if it is not running); idempotent. */
  route(backends: readonly EndpointBackend[]): Promise<void>;
  /** The machines it routes to now, and which of them pass its health check; undefined when it is not running. */
  routes(): Promise<{ machine: string; up: boolean }[] | undefined>;
  /** Idempotent; resolves once its process is gone. */
  stop(): Promise<void>;
}

export interface CreateMachineRequest {
  cluster: string;
  name: string;
  /** Monotonic per cluster, so a replacement never reuses a removed member's peer URL. */
  ordinal: number;
  failureDomain?: string;
  fence?: Fence;
}

/**
 * What the reconcile loop asks of a provider that runs Kubernetes components on its machines (one
 * that does not leaves `InfraProvider.kubernetes` out, and a spec with `kubernetes` is refused for it).
 */
export interface KubernetesMachines {
  /** Starts one component of a machine; idempotent. */
  startComponent(cluster: string, name: string, component: KubernetesComponent, launch: KubernetesLaunch, fence?: Fence): Promise<void>;
  /** Stops every Kubernetes component of a machine, scheduler first and apiserver last; idempotent. */
  stopComponents(cluster: string, name: string, fence?: Fence): Promise<void>;
  /** Each component's health as it answers now; reads only. */
  componentHealth(cluster: string, name: string): Promise<Record<KubernetesComponent, ComponentHealth>>;
  /** The cluster's control-plane endpoint. */
  endpoint(cluster: string): Promise<ControlPlaneEndpoint>;
  /** Routes the endpoint to exactly these machines' apiservers (the provider knows their addresses). */
  route(cluster: string, machines: readonly string[]): Promise<void>;
  /** The text of an admin kubeconfig for `server` (host:port): the endpoint's address, or one machine's apiserver. */
  adminKubeconfig(cluster: string, server: string): Promise<string>;
  /** host:port of a machine's kube-apiserver. */
  apiserverAddress(cluster: string, name: string): Promise<string>;
  /**
   * New certificates for the cluster's Kubernetes clients (the apiserver's etcd and front-proxy
   * clients, the admin, controller-manager and scheduler), from the CAs as they are; the CAs and the
   * service-account key stay. Components load them at their next start. `nextEtcdCa`: the
   * apiserver's etcd client from the etcd CA a rotation is bringing in (which every member trusts once
   * the rotation's first phase is through), not from the one that signs now.
   */
  renewClusterCertificates(cluster: string, options?: { nextEtcdCa?: boolean }): Promise<void>;
  /** A new serving certificate for the machine's apiserver, loaded at its next start. */
  renewMachineCertificates(cluster: string, name: string): Promise<void>;
}

export interface InfraProvider {
  /** Present on a provider that runs Kubernetes components. */
  readonly kubernetes?: KubernetesMachines;
  create(request: CreateMachineRequest): Promise<MachineInfra>;
  /** Undefined once the machine is gone. Reads only: no side effect on the machine or its host. */
  describe(cluster: string, name: string): Promise<MachineInfra | undefined>;
  /**
   * Moves a Provisioning machine on (a provider whose provisioning is its own slow work resumes it
   * here, after a crash or while it waits for a host); idempotent, and a no-op for a machine in any
   * other state. A failure leaves the machine Failed with the reason. Undefined once it is gone.
   */
  provision(cluster: string, name: string, fence?: Fence): Promise<MachineInfra | undefined>;
  /** The machine's etcd component started (providers: `components(...).etcd.start`). */
  startMember(cluster: string, name: string, launch: MemberLaunch, fence?: Fence): Promise<void>;
  /** The machine's etcd component stopped. */
  stopMember(cluster: string, name: string, fence?: Fence): Promise<void>;
  /** Stops the member process and starts tearing the machine down; idempotent. */
  delete(cluster: string, name: string, fence?: Fence): Promise<void>;
}

/** Which rolling restart a CA rotation needs next: trust both CAs, re-issue from the new one, drop the old. */
export type CaRotationPhase = 'trust' | 'reissue' | 'drop';

/** What a provider itself recorded about a machine (the bench reads ready times from here, not from reconcile passes). */
export interface MachineFacts {
  name: string;
  clientURL: string;
  peerURL: string;
  createdAt: number;
  /** When the provider let the machine finish provisioning (epoch ms). */
  readyAt: number;
}

/**
 * A provider whole, as every caller but the reconcile loop needs it: the machines' lifecycle, the
 * cluster's certificates and CA rotation, and the cluster's teardown. Each provider implements all of
 * it; a registry keyed by `spec.provider.name` builds one (src/adapters/providers/registry.ts).
 */
/**
 * A member's committed raft index read offline from its data dir, wherever that is: the measure
 * `recover` compares members by, stopped ones included. `unreachable`: its host did not answer, so it
 * may hold newer data than any member read.
 */
export type CommittedIndexReading = { kind: 'index'; raftIndex: number } | { kind: 'noData' } | { kind: 'unreachable'; reason: string };

export interface MachineProvider extends InfraProvider {
  /** The components of a machine; each call of theirs acts on the machine as it is then (starts and stops fenced by `fence`). */
  components(cluster: string, name: string, fence?: Fence): MachineComponents;
  /** The client certificate fastplane presents to the cluster's members; undefined when insecure. */
  clientTls(cluster: string): TlsFiles | undefined;
  /** The same files, brought to this host from the record store first: what a client is built from. */
  loadClientTls(cluster: string): Promise<TlsFiles | undefined>;
  /** Every certificate file of the cluster fastplane can read (expiry is judged on them). */
  certificateFiles(cluster: string): Promise<string[]>;
  /** New server and peer certificates for a machine whose member is stopped. */
  renewMemberCertificates(cluster: string, name: string, fence?: Fence): Promise<void>;
  renewClientCertificate(cluster: string): Promise<void>;
  caRotationPhase(cluster: string): Promise<CaRotationPhase | undefined>;
  /**
   * Changes the CA files for the phase and records it; undefined ends the rotation. Destructive (it
   * drops a CA at its last phase): refused with StaleFenceError when a newer lease holder acted on
   * the cluster.
   */
  advanceCaRotation(cluster: string, phase: CaRotationPhase | undefined, fence?: Fence): Promise<void>;
  /** The names of the cluster's machines this provider knows of. */
  machineNames(cluster: string): Promise<string[]>;
  /** Each machine's facts, read without side effects (a provider that cannot tell a machine's ready time yet leaves it out). */
  machineFacts(cluster: string): Promise<MachineFacts[]>;
  /** The committed index in the machine's member data dir, read where it lies without starting anything. */
  committedIndexOffline(cluster: string, name: string): Promise<CommittedIndexReading>;
  /** `fastplane down`: every machine deleted, then the cluster's provider state (its CA too). */
  destroyCluster(cluster: string, fence?: Fence): Promise<void>;
  /** Closes connections; the provider is not used afterwards. */
  close(): Promise<void>;
}

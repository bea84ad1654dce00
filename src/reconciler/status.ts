import type { ControlPlane } from '../api/control-plane.ts';
import type { ControlPlaneRecord, MachineRecord, StoredCondition } from '../domain/machine.ts';
import { agreedLeader, isHealthyVoter } from '../planner/health.ts';
import type { Condition, Decision, Observed, ObservedMachine } from '../planner/types.ts';
import { memberReading } from '../planner/view.ts';
import type { TlsFiles } from '../ports/etcd-admin.ts';
import type { KubernetesComponent } from '../ports/machine-provider.ts';

/** The `status -o json` contract (docs/architecture.md, "Status contract"). Times are ISO-8601, member IDs decimal strings. */
export interface ControlPlaneStatusDocument {
  name: string;
  metadata: { name: string; generation: number };
  spec: ControlPlane['spec'];
  status: {
    /** The generation the lease holder's last pass acted on (null before the first pass). */
    observedGeneration: number | null;
    /** The process holding the cluster's lease now, if any (host:pid). */
    reconciler: string | null;
    phase: string;
    replicas: number;
    readyReplicas: number;
    voters: number;
    learners: number;
    leader: string | null;
    endpoints: string[];
    conditions: { type: string; status: string; reason: string; message: string; lastTransitionTime: string }[];
    machines: {
      name: string;
      phase: string;
      role: string | null;
      memberId: string | null;
      address: string | null;
      clientURL: string | null;
      peerURL: string | null;
      version: string;
      failureDomain: string | null;
      createdAt: string;
      phaseTimes: Record<string, string>;
      /** A Kubernetes control plane's machine: the Kubernetes version and KCP v1beta2's machine conditions. */
      kubernetesVersion?: string;
      conditions?: MachineCondition[];
    }[];
    /** A Kubernetes control plane: where clients reach it (`fastplane kubeconfig NAME` writes a kubeconfig for it). */
    kubernetes?: { version: string; endpoint: string | null };
    waits: { code: string; message: string }[];
    /** Client credentials of a TLS cluster, for etcdctl. */
    tls?: TlsFiles;
  };
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** Keeps lastTransitionTime when a condition's status did not change. */
export function nextConditions(previous: readonly StoredCondition[] | undefined, conditions: Condition[], now: number): StoredCondition[] {
  const byType = new Map((previous ?? []).map((c) => [c.type, c]));
  return conditions.map((c) => {
    const before = byType.get(c.type);
    return { ...c, lastTransitionTime: before && before.status === c.status ? before.lastTransitionTime : now };
  });
}

function phaseOfControlPlane(decision: Decision): string {
  if (decision.converged) return 'Ready';
  const isTrue = (type: string): boolean => decision.conditions.some((c) => c.type === type && c.status === 'True');
  if (!isTrue('Available')) return decision.blocked ? 'Unavailable' : 'Initializing';
  if (isTrue('Remediating')) return 'Remediating';
  if (isTrue('RollingOut')) return 'RollingOut';
  if (isTrue('ScalingDown')) return 'ScalingDown';
  if (isTrue('ScalingUp')) return 'ScalingUp';
  return 'Degraded';
}

/** A Kubernetes machine's components all answer healthy (the machine found by its member's peer URLs). */
function componentsReady(observed: Observed, peerURLs: readonly string[]): boolean {
  const machine = observed.machines.find((m) => m.infra !== undefined && peerURLs.includes(m.infra.peerURL));
  const components = machine?.infra?.components;
  return components !== undefined && COMPONENT_CONDITIONS.every(([component]) => components[component]?.healthy === true);
}

/** A machine condition as KCP v1beta2 names them (EtcdMemberHealthy, APIServerPodHealthy, ...). */
export interface MachineCondition {
  type: string;
  status: 'True' | 'False';
  reason: string;
  message: string;
}

const COMPONENT_CONDITIONS: readonly [KubernetesComponent, string][] = [
  ['kube-apiserver', 'APIServerPodHealthy'],
  ['kube-controller-manager', 'ControllerManagerPodHealthy'],
  ['kube-scheduler', 'SchedulerPodHealthy'],
];

/** A Kubernetes machine's conditions: its etcd process, its member, each component, from one observation. */
function machineConditions(machine: ObservedMachine | undefined, memberHealthy: boolean): MachineCondition[] {
  const running = machine?.infra?.memberRunning === true;
  const conditions: MachineCondition[] = [
    { type: 'EtcdPodHealthy', status: running ? 'True' : 'False', reason: running ? 'Running' : 'DoesNotExist', message: '' },
    { type: 'EtcdMemberHealthy', status: memberHealthy ? 'True' : 'False', reason: memberHealthy ? 'Healthy' : 'NotHealthy', message: '' },
  ];
  for (const [component, type] of COMPONENT_CONDITIONS) {
    const seen = machine?.infra?.components?.[component];
    const ok = seen?.healthy === true;
    // KCP's pod reasons: Running once ready; Provisioning while it runs but is not ready yet; DoesNotExist.
    conditions.push({ type, status: ok ? 'True' : 'False', reason: ok ? 'Running' : seen?.running === true ? 'Provisioning' : 'DoesNotExist', message: ok ? '' : (seen?.reason ?? 'not observed') });
  }
  return conditions;
}

function machineEntry(record: MachineRecord): ControlPlaneStatusDocument['status']['machines'][number] {
  const phaseTimes: Record<string, string> = {};
  for (const [phase, at] of Object.entries(record.phaseTimes)) phaseTimes[phase] = iso(at);
  return {
    name: record.name,
    phase: record.phase,
    role: record.role ?? null,
    memberId: record.memberId ?? null,
    address: record.address ?? null,
    clientURL: record.clientURL ?? null,
    peerURL: record.peerURL ?? null,
    version: record.version,
    failureDomain: record.failureDomain ?? null,
    createdAt: iso(record.createdAt),
    phaseTimes,
    ...(record.kubernetesVersion === undefined ? {} : { kubernetesVersion: record.kubernetesVersion }),
  };
}

/** Builds the status document from records plus one observation and its decision. */
export function buildStatus(
  cp: ControlPlaneRecord,
  machines: MachineRecord[],
  observed: Observed,
  decision: Decision,
  conditions: StoredCondition[],
  tls: TlsFiles | undefined,
  reconciler: string | undefined,
): ControlPlaneStatusDocument {
  const members = observed.members.ok ? observed.members.list : [];
  const voters = members.filter((m) => !m.isLearner);
  // Ready: healthy, and reporting no errors (an alarm) either.
  const healthy = voters.filter((m) => isHealthyVoter(memberReading(m)) && m.status?.ok === true && m.status.status.errors.length === 0);
  const leaderId = agreedLeader(voters.map(memberReading));
  const leaderMember = members.find((m) => m.id === leaderId);
  const leaderMachine = machines.find((m) => leaderMember !== undefined && m.peerURL !== undefined && leaderMember.peerURLs.includes(m.peerURL));
  return {
    name: cp.name,
    metadata: { name: cp.name, generation: cp.generation },
    spec: cp.manifest.spec,
    status: {
      observedGeneration: cp.observedGeneration ?? null,
      reconciler: reconciler ?? null,
      phase: phaseOfControlPlane(decision),
      replicas: cp.manifest.spec.replicas,
      readyReplicas: cp.manifest.spec.kubernetes === undefined ? healthy.length : healthy.filter((member) => componentsReady(observed, member.peerURLs)).length,
      voters: voters.length,
      learners: members.length - voters.length,
      leader: leaderMachine?.name ?? leaderMember?.name ?? null,
      endpoints: voters.flatMap((m) => m.clientURLs.slice(0, 1)),
      conditions: conditions.map((c) => ({ type: c.type, status: c.status, reason: c.reason, message: c.message, lastTransitionTime: iso(c.lastTransitionTime) })),
      machines: [...machines]
        .sort((a, b) => a.ordinal - b.ordinal)
        .map((record) => {
          if (cp.manifest.spec.kubernetes === undefined) return machineEntry(record);
          const machine = observed.machines.find((m) => m.record.name === record.name);
          const member = members.find((m) => record.peerURL !== undefined && m.peerURLs.includes(record.peerURL));
          return { ...machineEntry(record), conditions: machineConditions(machine, member !== undefined && healthy.includes(member)) };
        }),
      waits: decision.waits.map((w) => ({ code: w.code, message: w.message })),
      ...(tls === undefined ? {} : { tls }),
      ...(cp.manifest.spec.kubernetes === undefined ? {} : { kubernetes: { version: cp.manifest.spec.kubernetes.version, endpoint: observed.endpoint?.address ?? null } }),
    },
  };
}

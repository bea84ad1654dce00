import { NOT_STARTED, startCareJob } from '../domain/care-job.ts';
import type { MachineRecord } from '../domain/machine.ts';
import type { LeaseGuard } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin } from '../ports/etcd-admin.ts';
import type { MachineProvider } from '../ports/machine-provider.ts';
import { BlockedError } from './blocked-error.ts';
import { driveJob, type JobStep } from './care-job.ts';
import { apiserversReady, drainEndpoint, kubernetesRestartStep, restartKubernetes, type KubernetesCare } from './kubernetes-restart.ts';
import { oneVoterAtATime, rollingStep, type RollingWork, type VoterHealth } from './rolling.ts';
import { done, proceed } from './steps.ts';

/** What certificate renewal needs of the provider: stop, re-issue; and the CA files of a rotation. */
export type CertificateProvider = Pick<MachineProvider, 'stopMember' | 'renewMemberCertificates' | 'renewClientCertificate' | 'caRotationPhase' | 'advanceCaRotation'>;

export interface RenewDeps {
  cluster: string;
  /**
   * Runs `use` with an etcd client that reads the trusted CAs and client certificate as they are now:
   * a CA rotation changes them between its rolling restarts.
   */
  withAdmin: <T>(use: (admin: EtcdAdmin) => Promise<T>) => Promise<T>;
  provider: CertificateProvider;
  machines: readonly MachineRecord[];
  /** Starts the machine's member again on its data dir, through the launch path that records how. */
  start: (machine: MachineRecord) => Promise<void>;
  /** The cluster's lease: checked before each member is stopped. */
  lease: LeaseGuard;
  clock: Clock;
  healthTimeoutMs: number;
  onNote: (text: string) => void;
  /** A Kubernetes control plane's components, restarted after the members; absent on an etcd-only one. */
  kubernetes?: KubernetesCare;
}

function machineOf(deps: RenewDeps, voter: VoterHealth): MachineRecord {
  const machine = voter.member.peerURLs.map((url) => deps.machines.find((m) => m.peerURL === url)).find((m) => m !== undefined);
  if (!machine) throw new BlockedError(`member ${voter.member.name || voter.member.id} has no machine on record; run fastplane up first`);
  return machine;
}

/**
 * Stops the voter's member, runs `between` while it is stopped, and starts it again. On a Kubernetes
 * control plane the endpoint stops routing to the machine first: its apiserver serves through that
 * member, and is routed to again by the components' restart that follows.
 */
async function restartMember(deps: RenewDeps, voter: VoterHealth, between: (machine: MachineRecord) => Promise<void>): Promise<MachineRecord> {
  const machine = machineOf(deps, voter);
  if (deps.kubernetes !== undefined) await drainEndpoint(deps.cluster, deps.kubernetes, machine.name);
  await deps.provider.stopMember(deps.cluster, machine.name, deps.lease.fence);
  await between(machine);
  await deps.start(machine);
  return machine;
}

const endpointsOf = (deps: RenewDeps): string[] => deps.machines.flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));

/**
 * On a Kubernetes control plane a member is stopped only while every apiserver is ready: each apiserver
 * reads and writes through its own machine's member, so stopping one takes that apiserver out too.
 */
function apiserverGate(deps: RenewDeps): Pick<RollingWork, 'gate'> {
  const { kubernetes } = deps;
  return kubernetes === undefined ? {} : { gate: () => apiserversReady(deps.cluster, kubernetes) };
}

/**
 * Restarts every member one at a time, followers first and the leader last after leadership moved
 * away, each voter healthy again before the next; `between` runs while the member is stopped.
 */
async function rollingRestart(deps: RenewDeps, between: (machine: MachineRecord) => Promise<void>, done: (machine: MachineRecord) => string): Promise<string[]> {
  const restarted: string[] = [];
  await deps.withAdmin((admin) =>
    oneVoterAtATime(admin, endpointsOf(deps), { clock: deps.clock, healthTimeoutMs: deps.healthTimeoutMs, beforeEach: () => deps.lease.verify(), ...apiserverGate(deps) }, async (voter) => {
      const machine = await restartMember(deps, voter, between);
      restarted.push(machine.name);
      deps.onNote(done(machine));
    }),
  );
  return restarted;
}

/**
 * Restarts the Kubernetes components of every machine (kubernetes-restart.ts), when there are any;
 * `between` runs while a machine's components are stopped.
 */
async function restartComponents(deps: RenewDeps, what: string, between?: (machine: string) => Promise<void>): Promise<void> {
  if (deps.kubernetes === undefined) return;
  await restartKubernetes(deps.cluster, deps.kubernetes, { lease: deps.lease, clock: deps.clock, patienceMs: deps.healthTimeoutMs, onNote: deps.onNote, between });
  deps.onNote(what);
}

/**
 * One step of a certificate renewal: new client certificates from the cluster's CA first, then each
 * member in turn is stopped, gets a new key and certificates while no process reads them, and starts
 * again, the cluster healthy again before the next. Old and new certificates come from the same CA, so
 * members that have not restarted yet keep trusting the ones that have. On a Kubernetes control plane
 * the Kubernetes clients' certificates are renewed next (stage `kubernetes`), then each machine's
 * components restart one machine at a time with a new apiserver serving certificate (stage `apiservers`).
 */
export function renewalStep(deps: RenewDeps, admin: EtcdAdmin, onRestarted?: (machine: string) => void): JobStep {
  return async (job, note) => {
    const { kubernetes } = deps;
    if (kubernetes !== undefined && job.stage === 'kubernetes') {
      await deps.lease.verify();
      await kubernetes.machines.renewClusterCertificates(deps.cluster);
      note('renewed the Kubernetes client certificates');
      return { result: proceed('Kubernetes client certificates renewed'), job: { ...job, stage: 'apiservers', rolling: NOT_STARTED } };
    }
    if (kubernetes !== undefined && job.stage === 'apiservers') {
      const renewServing = (machine: string): Promise<void> => kubernetes.machines.renewMachineCertificates(deps.cluster, machine);
      const { result, progress } = await kubernetesRestartStep(deps.cluster, kubernetes, deps.lease, job.rolling, renewServing);
      if (progress.done.length > job.rolling.done.length) note(`renewed the apiserver certificate of ${String(progress.done.at(-1))} and restarted its components`);
      return { result, job: { ...job, rolling: progress } };
    }
    if (job.stage === 'start') {
      await deps.lease.verify();
      await deps.provider.renewClientCertificate(deps.cluster);
      note('renewed the client certificate');
      return { result: proceed('client certificate renewed'), job: { ...job, stage: 'members' } };
    }
    const work = async (voter: VoterHealth): Promise<void> => {
      const machine = await restartMember(deps, voter, (m) => deps.provider.renewMemberCertificates(deps.cluster, m.name, deps.lease.fence));
      onRestarted?.(machine.name);
      note(`renewed the certificates of ${machine.name} and restarted it`);
    };
    const { result, progress } = await rollingStep({ admin, endpoints: endpointsOf(deps), beforeEach: () => deps.lease.verify(), work, ...apiserverGate(deps) }, job.rolling);
    const next = { ...job, rolling: progress };
    if (result.kind !== 'Done') return { result, job: next };
    const summary = `renewed the certificates of ${String(progress.done.length)} members`;
    return kubernetes === undefined ? { result: done(summary), job: next } : { result: proceed(summary), job: { ...next, stage: 'kubernetes' } };
  };
}

/** A whole renewal, driven to its end; returns the machines renewed. */
export async function renewCertificates(deps: RenewDeps): Promise<string[]> {
  const renewed: string[] = [];
  await deps.withAdmin((admin) =>
    driveJob(
      renewalStep(deps, admin, (machine) => renewed.push(machine)),
      startCareJob('RenewCertificates', 'Requested', deps.clock.now()),
      deps.clock,
      deps.healthTimeoutMs,
      deps.onNote,
    ),
  );
  return renewed;
}

/**
 * Every Kubernetes leaf from the new Kubernetes and front-proxy CAs, which every component trusts
 * since the first phase: the clients' certificates at once (the apiservers that have not restarted
 * yet trust them already), each apiserver's serving certificate while its machine's components are
 * stopped for their restart.
 */
async function reissueKubernetes(deps: RenewDeps, kubernetes: KubernetesCare): Promise<void> {
  await deps.lease.verify();
  await kubernetes.machines.renewClusterCertificates(deps.cluster);
  deps.onNote('renewed the Kubernetes client certificates from the new CAs: a kubeconfig printed from now on (fastplane kubeconfig) keeps working after the rotation');
  await restartComponents(deps, 'the components restarted with certificates from the new CAs', (machine) => kubernetes.machines.renewMachineCertificates(deps.cluster, machine));
}

/**
 * A new CA with an overlap bundle, in three rolling restarts so that at every moment each member
 * trusts every certificate it may be shown: (1) members and clients trust old and new CA; (2) the
 * client and each member get certificates from the new CA; (3) the old CA leaves the bundle. The
 * phase is recorded before each restart, so a rerun after a crash carries on where it stopped. On a
 * Kubernetes control plane the Kubernetes CA and the front-proxy CA go through the same phases
 * (Kubernetes' manual CA rotation), each followed by a rolling restart of the machines' components:
 * after the first, the apiservers and the kubeconfigs trust both of each CA, and the apiservers show
 * etcd a client certificate of its new CA (every member trusts it by then); after the second, every
 * Kubernetes leaf (serving, front-proxy, kubeconfig clients) is issued anew from the new CAs; after the
 * last, the components trust the new CAs only. The service-account key pair is no CA and stays.
 */
export async function rotateCertificateAuthority(deps: RenewDeps): Promise<string[]> {
  await deps.lease.verify();
  let phase = await deps.provider.caRotationPhase(deps.cluster);
  if (phase === undefined) {
    phase = 'trust';
    await deps.provider.advanceCaRotation(deps.cluster, phase, deps.lease.fence);
    deps.onNote(deps.kubernetes === undefined ? 'created a new CA; members and clients trust the old and the new one' : 'created new etcd, Kubernetes and front-proxy CAs; members, components and clients trust the old and the new ones');
  }
  let renewed: string[] = [];
  if (phase === 'trust') {
    await rollingRestart(deps, () => Promise.resolve(), (m) => `${m.name} restarted trusting both CAs`);
    if (deps.kubernetes !== undefined) {
      // Every member trusts the new CA now: the apiservers may show it a client certificate of the new CA.
      await deps.kubernetes.machines.renewClusterCertificates(deps.cluster, { nextEtcdCa: true });
      deps.onNote('renewed the Kubernetes client certificates, the apiserver etcd client from the new CA');
    }
    // One restart for both: each apiserver trusts the new CA before any member shows a certificate of
    // it, and shows etcd a client certificate of the new CA long before the old one is dropped.
    await restartComponents(deps, 'the components restarted trusting both CAs of each kind, the apiservers with an etcd client certificate from the new etcd CA');
    phase = 'reissue';
    await deps.lease.verify();
    await deps.provider.advanceCaRotation(deps.cluster, phase, deps.lease.fence);
  }
  if (phase === 'reissue') {
    await deps.provider.renewClientCertificate(deps.cluster);
    deps.onNote('renewed the client certificate from the new CA');
    renewed = await rollingRestart(
      deps,
      (machine) => deps.provider.renewMemberCertificates(deps.cluster, machine.name, deps.lease.fence),
      (machine) => `renewed the certificates of ${machine.name} from the new CA and restarted it`,
    );
    if (deps.kubernetes !== undefined) await reissueKubernetes(deps, deps.kubernetes);
    phase = 'drop';
    await deps.lease.verify();
    await deps.provider.advanceCaRotation(deps.cluster, phase, deps.lease.fence);
    deps.onNote(deps.kubernetes === undefined ? 'the old CA left the bundle' : 'the old CAs left the bundles');
  }
  await rollingRestart(deps, () => Promise.resolve(), (m) => `${m.name} restarted trusting the new CA only`);
  await restartComponents(deps, 'the components restarted trusting the new CAs only');
  await deps.lease.verify();
  await deps.provider.advanceCaRotation(deps.cluster, undefined, deps.lease.fence);
  return renewed;
}

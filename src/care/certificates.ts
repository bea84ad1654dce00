import type { MachineRecord } from '../domain/machine.ts';
import type { LeaseGuard } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin } from '../ports/etcd-admin.ts';
import type { MachineProvider, MemberLaunch } from '../ports/machine-provider.ts';
import { BlockedError } from './blocked-error.ts';
import { oneVoterAtATime, type VoterHealth } from './rolling.ts';

/** What certificate renewal needs of the provider: stop, re-issue, start; and the CA files of a rotation. */
export type CertificateProvider = Pick<MachineProvider, 'stopMember' | 'startMember' | 'renewMemberCertificates' | 'renewClientCertificate' | 'caRotationPhase' | 'advanceCaRotation'>;

export interface RenewDeps {
  cluster: string;
  /**
   * Runs `use` with an etcd client that reads the trusted CAs and client certificate as they are now:
   * a CA rotation changes them between its rolling restarts.
   */
  withAdmin: <T>(use: (admin: EtcdAdmin) => Promise<T>) => Promise<T>;
  provider: CertificateProvider;
  machines: readonly MachineRecord[];
  /** How the machine's member is started again on its data dir. */
  launchFor: (machine: MachineRecord) => MemberLaunch;
  /** The cluster's lease: checked before each member is stopped. */
  lease: LeaseGuard;
  clock: Clock;
  healthTimeoutMs: number;
  onNote: (text: string) => void;
}

function machineOf(deps: RenewDeps, voter: VoterHealth): MachineRecord {
  const machine = voter.member.peerURLs.map((url) => deps.machines.find((m) => m.peerURL === url)).find((m) => m !== undefined);
  if (!machine) throw new BlockedError(`member ${voter.member.name || voter.member.id} has no machine on record; run fastplane up first`);
  return machine;
}

/**
 * Restarts every member one at a time, followers first and the leader last after leadership moved
 * away, each voter healthy again before the next; `between` runs while the member is stopped.
 */
async function rollingRestart(deps: RenewDeps, between: (machine: MachineRecord) => Promise<void>, done: (machine: MachineRecord) => string): Promise<string[]> {
  const endpoints = deps.machines.flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));
  const restarted: string[] = [];
  await deps.withAdmin((admin) =>
    oneVoterAtATime(admin, endpoints, { clock: deps.clock, healthTimeoutMs: deps.healthTimeoutMs, beforeEach: () => deps.lease.verify() }, async (voter) => {
      const machine = machineOf(deps, voter);
      await deps.provider.stopMember(deps.cluster, machine.name, deps.lease.fence);
      await between(machine);
      await deps.provider.startMember(deps.cluster, machine.name, deps.launchFor(machine), deps.lease.fence);
      restarted.push(machine.name);
      deps.onNote(done(machine));
    }),
  );
  return restarted;
}

/**
 * New client and member certificates from the cluster's CA, applied by restarting the members one at
 * a time: each member is stopped, gets a new key and certificates while no process reads them, starts
 * again, and the cluster must be healthy again before the next. Old and new certificates come from the
 * same CA, so members that have not restarted yet keep trusting the ones that have.
 */
export async function renewCertificates(deps: RenewDeps): Promise<string[]> {
  await deps.lease.verify();
  await deps.provider.renewClientCertificate(deps.cluster);
  deps.onNote('renewed the client certificate');
  return rollingRestart(
    deps,
    (machine) => deps.provider.renewMemberCertificates(deps.cluster, machine.name, deps.lease.fence),
    (machine) => `renewed the certificates of ${machine.name} and restarted it`,
  );
}

/**
 * A new CA with an overlap bundle, in three rolling restarts so that at every moment each member
 * trusts every certificate it may be shown: (1) members and clients trust old and new CA; (2) the
 * client and each member get certificates from the new CA; (3) the old CA leaves the bundle. The
 * phase is recorded before each restart, so a rerun after a crash carries on where it stopped.
 */
export async function rotateCertificateAuthority(deps: RenewDeps): Promise<string[]> {
  await deps.lease.verify();
  let phase = await deps.provider.caRotationPhase(deps.cluster);
  if (phase === undefined) {
    phase = 'trust';
    await deps.provider.advanceCaRotation(deps.cluster, phase);
    deps.onNote('created a new CA; members and clients trust the old and the new one');
  }
  let renewed: string[] = [];
  if (phase === 'trust') {
    await rollingRestart(deps, () => Promise.resolve(), (m) => `${m.name} restarted trusting both CAs`);
    phase = 'reissue';
    await deps.lease.verify();
    await deps.provider.advanceCaRotation(deps.cluster, phase);
  }
  if (phase === 'reissue') {
    await deps.provider.renewClientCertificate(deps.cluster);
    deps.onNote('renewed the client certificate from the new CA');
    renewed = await rollingRestart(
      deps,
      (machine) => deps.provider.renewMemberCertificates(deps.cluster, machine.name, deps.lease.fence),
      (machine) => `renewed the certificates of ${machine.name} from the new CA and restarted it`,
    );
    phase = 'drop';
    await deps.lease.verify();
    await deps.provider.advanceCaRotation(deps.cluster, phase);
    deps.onNote('the old CA left the bundle');
  }
  await rollingRestart(deps, () => Promise.resolve(), (m) => `${m.name} restarted trusting the new CA only`);
  await deps.provider.advanceCaRotation(deps.cluster, undefined);
  return renewed;
}

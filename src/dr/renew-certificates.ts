import type { MachineRecord } from '../domain/machine.ts';
import type { FencedWriter } from '../executor/fenced-writer.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin } from '../ports/etcd-admin.ts';
import type { MemberLaunch } from '../ports/infra-provider.ts';
import { BlockedError } from './restore.ts';
import { oneVoterAtATime } from './rolling.ts';

/** What certificate renewal needs of the provider: stop, re-issue, start. */
export interface CertificateProvider {
  stopMember(cluster: string, name: string): Promise<void>;
  startMember(cluster: string, name: string, launch: MemberLaunch): Promise<void>;
  renewMemberCertificates(cluster: string, name: string): Promise<void>;
  renewClientCertificate(cluster: string): Promise<void>;
}

export interface RenewDeps {
  cluster: string;
  admin: EtcdAdmin;
  provider: CertificateProvider;
  machines: readonly MachineRecord[];
  /** How the machine's member is started again on its data dir. */
  launchFor: (machine: MachineRecord) => MemberLaunch;
  /** The cluster's lease: checked before each member is stopped. */
  writer: FencedWriter;
  clock: Clock;
  healthTimeoutMs: number;
  onNote: (text: string) => void;
}

/**
 * New client and member certificates from the cluster's CA, applied by restarting the members one at
 * a time: each member is stopped, gets a new key and certificates while no process reads them, starts
 * again, and the cluster must be healthy again before the next. Old and new certificates come from the
 * same CA, so members that have not restarted yet keep trusting the ones that have.
 */
export async function renewCertificates(deps: RenewDeps): Promise<string[]> {
  const byPeer = new Map(deps.machines.flatMap((m) => (m.peerURL === undefined ? [] : [[m.peerURL, m] as const])));
  const endpoints = deps.machines.flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));
  await deps.writer.verify();
  await deps.provider.renewClientCertificate(deps.cluster);
  deps.onNote('renewed the client certificate');
  const renewed: string[] = [];
  await oneVoterAtATime(deps.admin, endpoints, { clock: deps.clock, healthTimeoutMs: deps.healthTimeoutMs, beforeEach: () => deps.writer.verify() }, async (voter) => {
    const machine = voter.member.peerURLs.map((url) => byPeer.get(url)).find((m) => m !== undefined);
    if (!machine) throw new BlockedError(`member ${voter.member.name || voter.member.id} has no machine on record; run fastplane up first`);
    await deps.provider.stopMember(deps.cluster, machine.name);
    await deps.provider.renewMemberCertificates(deps.cluster, machine.name);
    await deps.provider.startMember(deps.cluster, machine.name, deps.launchFor(machine));
    renewed.push(machine.name);
    deps.onNote(`renewed the certificates of ${machine.name} and restarted it`);
  });
  return renewed;
}

import { InvalidInputError } from '../../api/errors.ts';
import { EtcdAdminError, type EtcdAdmin, type EtcdAlarm, type EtcdMember, type EtcdMemberStatus } from '../../ports/etcd-admin.ts';

/** Faults the chaos tests ask for by name, through FASTPLANE_INJECT_FAULTS (comma-separated). */
export const INJECTABLE_FAULTS = ['remove-answers-server-stopped'] as const;
export type InjectableFault = (typeof INJECTABLE_FAULTS)[number];

/**
 * Wraps the real adapter to reproduce etcd answers that are hard to provoke on demand, such as a
 * removal that succeeded but was answered "server stopped" (what etcd says when the removed member
 * served the request). For tests only; every other call passes through untouched.
 */
export class FaultInjectingEtcdAdmin implements EtcdAdmin {
  constructor(
    private readonly inner: EtcdAdmin,
    private readonly faults: ReadonlySet<InjectableFault>,
  ) {}

  memberList(endpoints: readonly string[], options?: { linearizable: boolean }): Promise<EtcdMember[]> {
    return this.inner.memberList(endpoints, options);
  }

  addLearner(endpoints: readonly string[], peerURL: string): Promise<{ member: EtcdMember; members: EtcdMember[] }> {
    return this.inner.addLearner(endpoints, peerURL);
  }

  promoteLearner(endpoints: readonly string[], memberId: string): Promise<void> {
    return this.inner.promoteLearner(endpoints, memberId);
  }

  async removeMember(endpoints: readonly string[], memberId: string): Promise<void> {
    await this.inner.removeMember(endpoints, memberId);
    if (this.faults.has('remove-answers-server-stopped')) throw new EtcdAdminError('ServerStopped', 'etcdserver: server stopped (injected)');
  }

  moveLeader(leaderEndpoint: string, targetMemberId: string): Promise<void> {
    return this.inner.moveLeader(leaderEndpoint, targetMemberId);
  }

  status(endpoint: string, options?: { timeoutMs?: number }): Promise<EtcdMemberStatus> {
    return this.inner.status(endpoint, options);
  }

  alarms(endpoints: readonly string[]): Promise<EtcdAlarm[]> {
    return this.inner.alarms(endpoints);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** The admin to use: the real one, wrapped when test hooks name faults to inject (comma-separated). */
export function withInjectedFaults(admin: EtcdAdmin, faults: string | undefined): EtcdAdmin {
  const names = (faults ?? '').split(',').map((s) => s.trim()).filter(Boolean);
  if (names.length === 0) return admin;
  const unknown = names.filter((n) => !(INJECTABLE_FAULTS as readonly string[]).includes(n));
  if (unknown.length > 0) throw new InvalidInputError([`FASTPLANE_INJECT_FAULTS: unknown fault ${unknown.join(', ')}; known: ${INJECTABLE_FAULTS.join(', ')}`]);
  return new FaultInjectingEtcdAdmin(admin, new Set(names as InjectableFault[]));
}

import { Etcd3Admin } from '../../src/adapters/etcd3-admin.ts';
import type { EtcdMember, EtcdMemberStatus } from '../../src/ports/etcd-admin.ts';

/** Asks etcd itself (not fastplane's records) for the members and every member's own status. */
export async function askEtcd(endpoints: string[]): Promise<{ members: EtcdMember[]; statuses: EtcdMemberStatus[] }> {
  const admin = new Etcd3Admin();
  try {
    const members = await admin.memberList(endpoints);
    const statuses = await Promise.all(members.flatMap((m) => m.clientURLs.slice(0, 1)).map((url) => admin.status(url)));
    return { members, statuses };
  } finally {
    await admin.close();
  }
}

import type { LeaseGuard, MaintainOptions } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin, EtcdAlarm } from '../ports/etcd-admin.ts';
import type { EtcdMaintenance } from '../ports/etcd-maintenance.ts';
import { healthyVoters, oneVoterAtATime } from './rolling.ts';

export interface MaintainDeps {
  admin: EtcdAdmin;
  maintenance: EtcdMaintenance;
  endpoints: readonly string[];
  lease: LeaseGuard;
  clock: Clock;
  healthTimeoutMs: number;
  onNote: (text: string) => void;
}

export interface MaintainReport {
  /** The revision history was compacted up to, when it was. */
  compactedTo?: number;
  /** Members defragmented, in order, with the bytes each backend file had before and after. */
  defragmented: { member: string; before: number; after: number }[];
  disarmed: EtcdAlarm[];
  /** Why each step ran (or did not), for the user. */
  reasons: string[];
}

function fragmentation(dbSize: number, dbSizeInUse: number): number {
  return dbSize === 0 ? 0 : (dbSize - dbSizeInUse) / dbSize;
}

/**
 * One round of care: compaction to the retained window, defragmentation of fragmented members one at a
 * time (followers first, the leader last after moving leadership away, the cluster healthy between),
 * and recovery from a NOSPACE alarm: compact everything, defragment every member, then disarm.
 */
export async function maintain(deps: MaintainDeps, options: MaintainOptions): Promise<MaintainReport> {
  const report: MaintainReport = { defragmented: [], disarmed: [], reasons: [] };
  const note = (text: string): void => {
    report.reasons.push(text);
    deps.onNote(text);
  };
  const nospace = (await deps.admin.alarms(deps.endpoints)).filter((alarm) => alarm.alarm === 'NOSPACE');
  const health = await healthyVoters(deps.admin, deps.endpoints);
  const leader = health.voters.find((v) => v.member.id === health.leaderId);
  const { revision } = await deps.maintenance.usage(leader?.endpoint ?? deps.endpoints[0] ?? '');
  const target = nospace.length > 0 ? revision : revision - options.retainRevisions;
  await deps.lease.verify();
  if (target > 1) {
    await deps.maintenance.compact(deps.endpoints, target);
    report.compactedTo = target;
    note(nospace.length > 0 ? `NOSPACE alarm: compacted all history up to revision ${String(target)}` : `compacted history up to revision ${String(target)}, keeping the last ${String(options.retainRevisions)} revisions`);
  } else {
    note(`history is within the ${String(options.retainRevisions)} retained revisions: no compaction`);
  }

  const usages = await Promise.all(health.voters.map(async (v) => ({ voter: v, usage: await deps.maintenance.usage(v.endpoint) })));
  const fragmented = usages.filter(({ usage }) => nospace.length > 0 || fragmentation(usage.dbSize, usage.dbSizeInUse) >= options.fragmentationThreshold);
  for (const { voter, usage } of usages) {
    const share = Math.round(fragmentation(usage.dbSize, usage.dbSizeInUse) * 100);
    if (!fragmented.some((f) => f.voter.member.id === voter.member.id)) note(`${voter.member.name}: ${String(share)}% free pages, below the threshold: not defragmented`);
  }
  await oneVoterAtATime(
    deps.admin,
    deps.endpoints,
    { clock: deps.clock, healthTimeoutMs: deps.healthTimeoutMs, beforeEach: () => deps.lease.verify(), only: new Set(fragmented.map((f) => f.voter.member.id)) },
    async (voter) => {
      const before = (await deps.maintenance.usage(voter.endpoint)).dbSize;
      await deps.maintenance.defragment(voter.endpoint);
      const after = (await deps.maintenance.usage(voter.endpoint)).dbSize;
      report.defragmented.push({ member: voter.member.name, before, after });
      note(`defragmented ${voter.member.name}: ${String(before)} -> ${String(after)} bytes`);
    },
  );
  for (const alarm of nospace) {
    await deps.lease.verify();
    await deps.maintenance.disarm(deps.endpoints, alarm);
    report.disarmed.push(alarm);
    note(`disarmed the NOSPACE alarm of member ${alarm.memberId}`);
  }
  return report;
}

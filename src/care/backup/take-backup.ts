import { createWriteStream } from 'node:fs';
import { link, mkdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { SnapshotStatus, SnapshotTools } from '../../ports/care.ts';
import type { EtcdAdmin, EtcdMember } from '../../ports/etcd-admin.ts';
import type { EtcdMaintenance, MemberUsage } from '../../ports/etcd-maintenance.ts';
import { isHealthyVoter } from '../../planner/health.ts';
import { backupFileName, sidecarPath, type Backup, type BackupSidecar } from './backup-files.ts';

/** Why a backup was not taken: no member to take it from (a safety matter), or the snapshot itself failed. */
export type BackupFailure = 'NoHealthyMember' | 'SnapshotFailed' | 'VerificationFailed';

export class BackupError extends Error {
  override readonly name = 'BackupError';
  constructor(
    readonly reason: BackupFailure,
    message: string,
  ) {
    super(message);
  }
}

export interface BackupDeps {
  cluster: string;
  etcd: EtcdAdmin;
  maintenance: EtcdMaintenance;
  /** Client URLs to read the member list through. */
  endpoints: readonly string[];
  /** The cluster's backups folder. */
  dir: string;
  /** Opens the snapshot file with the tools of the member's etcd version; hashes and writes files. */
  tools: SnapshotTools;
  now: () => Date;
}

interface Source {
  member: EtcdMember;
  endpoint: string;
  usage: MemberUsage;
}

function message(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * A voter that knows its leader, followers first: a snapshot reads the whole backend, load the leader
 * need not carry. Learners are skipped: they may not have the data yet.
 */
async function pickSource(deps: BackupDeps): Promise<Source> {
  let members: EtcdMember[];
  try {
    members = await deps.etcd.memberList(deps.endpoints);
  } catch (error) {
    throw new BackupError('NoHealthyMember', `cannot read the member list of ${deps.cluster}: ${message(error)}`);
  }
  const voters = members.filter((m) => !m.isLearner && m.clientURLs.length > 0);
  const answers = await Promise.all(
    voters.map(async (member) => {
      const endpoint = member.clientURLs[0] ?? '';
      try {
        return { member, endpoint, usage: await deps.maintenance.usage(endpoint) };
      } catch {
        return undefined;
      }
    }),
  );
  const healthy = answers.filter((s): s is Source => s !== undefined && !s.usage.isLearner && isHealthyVoter({ id: s.member.id, name: s.member.name, leaderId: s.usage.leaderId }));
  const source = healthy.find((s) => s.usage.leaderId !== s.member.id) ?? healthy[0];
  if (!source) throw new BackupError('NoHealthyMember', `no healthy voter of ${deps.cluster} answers (asked ${String(voters.length)}); no backup taken`);
  return source;
}

/**
 * Takes a snapshot through the maintenance API from a healthy member, into a temporary file in the
 * backups folder; verifies it (non-empty, opens with `snapshot status` of the member's version) and
 * only then links it to its final name (never over another file) and writes its sidecar. A failure leaves no file behind.
 */
export async function takeBackup(deps: BackupDeps): Promise<Backup> {
  const source = await pickSource(deps);
  await mkdir(deps.dir, { recursive: true, mode: 0o700 });
  const takenAt = deps.now();
  const partial = join(deps.dir, `.partial-${String(process.pid)}-${String(takenAt.getTime())}.db`);
  try {
    try {
      await deps.maintenance.snapshot(source.endpoint, createWriteStream(partial, { mode: 0o600 }));
    } catch (error) {
      throw new BackupError('SnapshotFailed', `snapshot from ${source.member.name} (${source.endpoint}) failed: ${message(error)}`);
    }
    const { size } = await stat(partial);
    if (size === 0) throw new BackupError('VerificationFailed', `snapshot from ${source.member.name} is empty`);
    let status: SnapshotStatus;
    try {
      status = await deps.tools.status(source.usage.version, partial);
    } catch (error) {
      throw new BackupError('VerificationFailed', `snapshot from ${source.member.name} does not open: ${message(error)}`);
    }
    let liveKeys: number;
    try {
      liveKeys = await deps.maintenance.countKeys(source.endpoint, status.revision);
    } catch (error) {
      throw new BackupError('VerificationFailed', `cannot count the keys of ${source.member.name} at revision ${String(status.revision)}: ${message(error)}`);
    }
    const sidecar: BackupSidecar = {
      cluster: deps.cluster,
      clusterId: source.usage.clusterId,
      member: source.member.name,
      memberId: source.member.id,
      // The file's own revision: the member's header may have moved on while the snapshot streamed.
      revision: status.revision,
      raftIndex: source.usage.raftIndex,
      totalKeys: status.totalKey,
      liveKeys,
      size,
      sha256: await deps.tools.sha256(partial),
      etcdVersion: source.usage.version,
      takenAt: takenAt.toISOString(),
    };
    const file = join(deps.dir, backupFileName(takenAt, status.revision));
    // A link fails rather than replace a file of that name: a backup never overwrites another.
    await link(partial, file);
    await deps.tools.writeAtomic(sidecarPath(file), `${JSON.stringify(sidecar, null, 2)}\n`, 0o600);
    return { ...sidecar, file };
  } finally {
    await rm(partial, { force: true });
  }
}

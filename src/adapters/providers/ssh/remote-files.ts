import { randomBytes } from 'node:crypto';
import { stat } from 'node:fs/promises';
import { dirname } from 'node:path';
import { InvalidInputError } from '../../../api/errors.ts';
import type { MemberLaunch } from '../../../ports/machine-provider.ts';
import { snapshotToolBeside } from '../../etcd/etcd-tools.ts';
import { sha256OfFile } from '../../state-files.ts';
import { placeFilesScript, q, receiveFileScript, restoreScript, SNAPSHOT_CHANGED, stagedSnapshotPath, type RemoteMember, type RemoteRestore } from './remote-scripts.ts';
import type { SshConnections, SshTarget } from './ssh-connections.ts';

/** What copying and restoring need of the connections: commands and uploads. */
export type HostShell = Pick<SshConnections, 'exec' | 'upload'>;

/** Files fastplane puts on a host: certificates and keys, binaries, a snapshot to restore. */

export interface RemoteFile {
  path: string;
  content: Buffer;
  mode: number;
}

/**
 * Writes files on the host, their content on the command's stdin (never on its command line): all
 * received first, then moved into place, so a member never finds a key without its certificate.
 */
export async function writeRemoteFiles(ssh: SshConnections, host: SshTarget, files: RemoteFile[]): Promise<void> {
  for (const file of files) {
    const received = await ssh.exec(host, receiveFileScript(file.path, file.mode), { stdin: file.content });
    if (received.code !== 0) throw new Error(`writing ${file.path} on ${host.address} failed: ${received.stderr.trim()}`);
  }
  const placed = await ssh.exec(host, placeFilesScript(files.map((f) => f.path)));
  if (placed.code !== 0) throw new Error(`writing files on ${host.address} failed: ${placed.stderr.trim()}`);
}

/**
 * A local executable on the host at `remote`, copied once. The copy's sha256 is checked when it
 * arrives and then written beside it (`<remote>.sha256`), so a later use compares 64 bytes instead of
 * hashing a 100 MB program on the host again. A sidecar is written only after its copy is in place.
 */
export async function ensureRemoteCopy(ssh: HostShell, host: SshTarget, local: string, remote: string): Promise<string> {
  const sha = await localSha256(local);
  const sidecar = copyRecordOf(remote);
  const present = await ssh.exec(host, `[ -x ${q(remote)} ] && cat ${q(sidecar)} 2>/dev/null || true`);
  if (present.stdout.trim() === sha) return remote;
  const part = `${remote}.part-${randomBytes(4).toString('hex')}`;
  await ssh.exec(host, `mkdir -p ${q(dirname(remote))}`);
  await ssh.upload(host, local, part);
  const check = await ssh.exec(host, `sha256sum ${q(part)}`);
  if (!check.stdout.startsWith(sha)) {
    await ssh.exec(host, `rm -f ${q(part)}`);
    throw new Error(`${local} copied to ${host.address} has the wrong sha256 (${check.stdout.slice(0, 64)}, expected ${sha})`);
  }
  await ssh.exec(host, `rm -f ${q(sidecar)} && chmod 755 ${q(part)} && mv ${q(part)} ${q(remote)} && echo ${sha} > ${q(sidecar)}`);
  return remote;
}

/** Where the sha256 of a verified copy at `remote` is recorded. */
export function copyRecordOf(remote: string): string {
  return `${remote}.sha256`;
}

/** Hashes of local programs, by file identity: a process copies the same few programs to many hosts. */
const localHashes = new Map<string, { identity: string; sha: string }>();

export async function localSha256(path: string): Promise<string> {
  const stats = await stat(path);
  const identity = `${String(stats.dev)}:${String(stats.ino)}:${String(stats.size)}:${String(stats.mtimeMs)}`;
  const known = localHashes.get(path);
  if (known?.identity === identity) return known.sha;
  const sha = await sha256OfFile(path);
  localHashes.set(path, { identity, sha });
  return sha;
}

/**
 * The first member of a restored cluster (`fastplane restore`): the snapshot is restored on the host by
 * the snapshot tool of the member's own version, before etcd first starts. A snapshot its owner staged
 * on the host (`<baseDir>/snapshots/<sha256>.db`) is restored from there; otherwise it is copied over.
 * A data dir on the host was restored (or has run) before: it is used as it is.
 */
export async function restoreOnHost(
  ssh: HostShell,
  host: SshTarget,
  target: { member: RemoteMember; peerURL: string; localBinary: string; remoteBinDir: string; baseDir: string },
  launch: MemberLaunch & { restoreFrom: NonNullable<MemberLaunch['restoreFrom']> },
): Promise<void> {
  const { member } = target;
  if ((await ssh.exec(host, `[ -d ${q(member.dataDir)} ]`)).code === 0) return;
  const local = snapshotToolBeside(target.localBinary);
  const tool = await ensureRemoteCopy(ssh, host, local, `${target.remoteBinDir}/${local.slice(local.lastIndexOf('/') + 1)}-${launch.version}`);
  const restore = { tool, sha256: launch.restoreFrom.sha256, memberName: launch.memberName, peerURL: target.peerURL, initialCluster: launch.initialCluster, clusterToken: launch.clusterToken };
  await ssh.exec(host, `mkdir -p ${q(member.dir)} && chmod 700 ${q(member.dir)}`);
  const staged = stagedSnapshotPath(target.baseDir, launch.restoreFrom.sha256);
  if ((await ssh.exec(host, `[ -f ${q(staged)} ]`)).code === 0) {
    // The script checks the staged file's sha256 itself: one read of it, not two. One that does not
    // match its name is left where it is, and the snapshot is copied as if it were not there.
    const restored = await runRestore(ssh, host, member, { ...restore, snapshot: staged, staged: true });
    if (restored.code !== SNAPSHOT_CHANGED) {
      checkRestored(restored, launch.restoreFrom.file, host);
      return;
    }
  }
  const snapshot = `${member.dir}/restore-${randomBytes(4).toString('hex')}.db`;
  await ssh.upload(host, launch.restoreFrom.file, snapshot);
  const restored = await runRestore(ssh, host, member, { ...restore, snapshot });
  if (restored.code === SNAPSHOT_CHANGED) throw new InvalidInputError([`${launch.restoreFrom.file}: ${restored.stderr.trim()}`]);
  checkRestored(restored, launch.restoreFrom.file, host);
}

function runRestore(ssh: HostShell, host: SshTarget, member: RemoteMember, restore: RemoteRestore): Promise<{ code: number; stderr: string }> {
  return ssh.exec(host, restoreScript(member, restore), { timeoutMs: 600_000 });
}

function checkRestored(restored: { code: number; stderr: string }, file: string, host: SshTarget): void {
  if (restored.code !== 0) throw new Error(`restoring ${file} on ${host.address} failed: ${restored.stderr.trim()}`);
}

import { randomBytes } from 'node:crypto';
import { dirname } from 'node:path';
import { InvalidInputError } from '../../../api/errors.ts';
import type { MemberLaunch } from '../../../ports/machine-provider.ts';
import { snapshotToolBeside } from '../../etcd/etcd-tools.ts';
import { sha256OfFile } from '../../state-files.ts';
import { placeFilesScript, q, receiveFileScript, restoreScript, SNAPSHOT_CHANGED, type RemoteMember } from './remote-scripts.ts';
import type { SshConnections, SshTarget } from './ssh-connections.ts';

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

/** A local executable on the host at `remote`, copied once; the copy's sha256 is checked before it is used. */
export async function ensureRemoteCopy(ssh: SshConnections, host: SshTarget, local: string, remote: string): Promise<string> {
  const sha = await sha256OfFile(local);
  const present = await ssh.exec(host, `sha256sum ${q(remote)} 2>/dev/null || true`);
  if (present.stdout.startsWith(sha)) return remote;
  const part = `${remote}.part-${randomBytes(4).toString('hex')}`;
  await ssh.exec(host, `mkdir -p ${q(dirname(remote))}`);
  await ssh.upload(host, local, part);
  const check = await ssh.exec(host, `sha256sum ${q(part)}`);
  if (!check.stdout.startsWith(sha)) {
    await ssh.exec(host, `rm -f ${q(part)}`);
    throw new Error(`${local} copied to ${host.address} has the wrong sha256 (${check.stdout.slice(0, 64)}, expected ${sha})`);
  }
  await ssh.exec(host, `chmod 755 ${q(part)} && mv ${q(part)} ${q(remote)}`);
  return remote;
}

/**
 * The first member of a restored cluster (`fastplane restore`): the snapshot is copied to the host and
 * restored there by the snapshot tool of the member's own version, before etcd first starts. A data
 * dir on the host was restored (or has run) before: it is used as it is.
 */
export async function restoreOnHost(
  ssh: SshConnections,
  host: SshTarget,
  target: { member: RemoteMember; peerURL: string; localBinary: string; remoteBinDir: string },
  launch: MemberLaunch & { restoreFrom: NonNullable<MemberLaunch['restoreFrom']> },
): Promise<void> {
  const { member } = target;
  if ((await ssh.exec(host, `[ -d ${q(member.dataDir)} ]`)).code === 0) return;
  const local = snapshotToolBeside(target.localBinary);
  const tool = await ensureRemoteCopy(ssh, host, local, `${target.remoteBinDir}/${local.slice(local.lastIndexOf('/') + 1)}-${launch.version}`);
  const snapshot = `${member.dir}/restore-${randomBytes(4).toString('hex')}.db`;
  await ssh.exec(host, `mkdir -p ${q(member.dir)} && chmod 700 ${q(member.dir)}`);
  await ssh.upload(host, launch.restoreFrom.file, snapshot);
  const restored = await ssh.exec(
    host,
    restoreScript(member, { tool, snapshot, sha256: launch.restoreFrom.sha256, memberName: launch.memberName, peerURL: target.peerURL, initialCluster: launch.initialCluster, clusterToken: launch.clusterToken }),
    { timeoutMs: 600_000 },
  );
  if (restored.code === SNAPSHOT_CHANGED) throw new InvalidInputError([`${launch.restoreFrom.file}: ${restored.stderr.trim()}`]);
  if (restored.code !== 0) throw new Error(`restoring ${launch.restoreFrom.file} on ${host.address} failed: ${restored.stderr.trim()}`);
}

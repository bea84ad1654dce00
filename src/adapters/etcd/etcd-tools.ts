import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { findEtcdBinary } from './etcd-binaries.ts';

/**
 * etcd's offline snapshot tools for a version: `etcdutl` from 3.5 on, `etcdctl` (API v3) before it.
 * Each is looked for beside the etcd binary of that version, so a snapshot is read and restored by the
 * code of the member that will serve it.
 */

export interface SnapshotFileStatus {
  hash: number;
  revision: number;
  totalKey: number;
  totalSize: number;
}

export interface SnapshotRestoreRequest {
  file: string;
  dataDir: string;
  memberName: string;
  peerURL: string;
  initialCluster: string;
  clusterToken: string;
}

const TOOL_TIMEOUT_MS = 600_000;

/** Where the etcd binary of a version is: the installed ones, or a control plane's own lookup (spec.etcd.binaries). */
export type FindEtcdBinary = (version: string) => string;

/** The snapshot tool beside an etcd binary: etcdutl from 3.5 on, etcdctl (API v3) before it. */
export function snapshotToolBeside(etcdBinary: string): string {
  const dir = dirname(etcdBinary);
  const tool = ['etcdutl', 'etcdctl'].map((name) => join(dir, name)).find((path) => existsSync(path));
  if (tool === undefined) throw new Error(`neither etcdutl nor etcdctl is installed beside ${etcdBinary}`);
  return tool;
}

function snapshotTool(version: string, findBinary: FindEtcdBinary): string {
  return snapshotToolBeside(findBinary(version));
}

function run(tool: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const env = { ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('ETCD'))), ETCDCTL_API: '3' };
    execFile(tool, args, { env, timeout: TOOL_TIMEOUT_MS, maxBuffer: 16 << 20 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${tool} ${args.slice(0, 2).join(' ')} failed: ${stderr.trim() || error.message}`));
      else resolve(stdout);
    });
  });
}

/** `snapshot status -w json`: reads the whole file, so it also checks that the database opens. */
export async function snapshotFileStatus(version: string, file: string, findBinary: FindEtcdBinary = findEtcdBinary): Promise<SnapshotFileStatus> {
  const text = await run(snapshotTool(version, findBinary), ['snapshot', 'status', file, '-w', 'json']);
  return JSON.parse(text) as SnapshotFileStatus;
}

/** `snapshot restore` into a data dir that must not exist yet; it checks the snapshot's own hash trailer. */
export async function restoreSnapshot(version: string, request: SnapshotRestoreRequest, findBinary: FindEtcdBinary = findEtcdBinary): Promise<void> {
  await run(snapshotTool(version, findBinary), [
    'snapshot', 'restore', request.file,
    '--data-dir', request.dataDir,
    '--name', request.memberName,
    '--initial-advertise-peer-urls', request.peerURL,
    '--initial-cluster', request.initialCluster,
    '--initial-cluster-token', request.clusterToken,
  ]);
}

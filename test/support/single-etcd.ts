import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findEtcdBinary } from '../../src/adapters/etcd/etcd-binaries.ts';
import { openKvClient } from '../../src/adapters/etcd/etcd3-admin.ts';
import { stopProcess, withoutEtcdVariables } from '../../src/adapters/host/processes.ts';

export interface SingleEtcd {
  /** The client URL, plain http. */
  endpoint: string;
  pid: number;
  /** Kills the process by its PID and removes its data dir. */
  stop(): Promise<void>;
}

/**
 * A one-member etcd (plain http) on `address`, ports 2379/2380, with a temporary data dir: for tests
 * that need an etcd but not a fastplane cluster (the etcd StateStore's contract). Resolves once it
 * answers; if it never does, it is stopped and its dir removed before the error is thrown.
 */
export async function startSingleEtcd(address: string, version = '3.4.23'): Promise<SingleEtcd> {
  const dataDir = mkdtempSync(join(tmpdir(), 'fastplane-single-etcd-'));
  const client = `http://${address}:2379`;
  const peer = `http://${address}:2380`;
  const child = spawn(
    findEtcdBinary(version),
    [
      '--name', 'single',
      '--data-dir', dataDir,
      '--listen-client-urls', client,
      '--advertise-client-urls', client,
      '--listen-peer-urls', peer,
      '--initial-advertise-peer-urls', peer,
      '--initial-cluster', `single=${peer}`,
      '--initial-cluster-state', 'new',
      '--log-level', 'error',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'], env: withoutEtcdVariables() },
  );
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const pid = child.pid;
  const stop = async (): Promise<void> => {
    if (pid !== undefined) await stopProcess(pid, dataDir, 2000);
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    if (pid === undefined) throw new Error('etcd did not start');
    await waitUntilServing(client, () => child.exitCode !== null);
    return { endpoint: client, pid, stop };
  } catch (error) {
    await stop();
    throw new Error(`single etcd on ${address}: ${error instanceof Error ? error.message : String(error)}\n${stderr}`, { cause: error });
  }
}

async function waitUntilServing(endpoint: string, exited: () => boolean): Promise<void> {
  const kv = openKvClient([endpoint], { callTimeoutMs: 1000 });
  try {
    for (let attempt = 0; attempt < 100; attempt++) {
      if (exited()) throw new Error('etcd exited');
      try {
        await kv.get('probe').string();
        return;
      } catch {
        await sleep(100);
      }
    }
    throw new Error('etcd did not answer within 10 s');
  } finally {
    kv.close();
  }
}

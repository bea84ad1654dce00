import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, fchmodSync, openSync, readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isExiting, isProcessAlive, processArguments } from './process-status.ts';

/** Processes fastplane runs on this host (etcd members): started detached, found and stopped by PID and data dir. */

const POLL_MS = 100;

/** The recorded PID is still our etcd: alive, and its command line names this data dir (PID reuse). */
export function isOurProcess(pid: number, dataDir: string): boolean {
  return isProcessAlive(pid) && processArguments(pid).includes(dataDir);
}

/** PIDs of live processes whose command line names this data dir (found by scanning /proc). */
export function pidsUsing(dataDir: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => isOurProcess(pid, dataDir));
}

/**
 * Sends SIGTERM, waits up to graceMs, then SIGKILL; resolves once the process has exited, its ports
 * closed, so that a member started next on the same address can bind them.
 */
export async function stopProcess(pid: number, dataDir: string, graceMs: number): Promise<void> {
  if (isOurProcess(pid, dataDir)) {
    signal(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (isOurProcess(pid, dataDir) && Date.now() < deadline) await sleep(POLL_MS);
    if (isOurProcess(pid, dataDir)) signal(pid, 'SIGKILL');
  }
  // Its command line empties before its sockets close (see isExiting).
  const killDeadline = Date.now() + 5000;
  while (isOurProcess(pid, dataDir) || isExiting(pid)) {
    if (Date.now() > killDeadline) throw new Error(`etcd process ${String(pid)} survived SIGKILL`);
    await sleep(POLL_MS / 5);
  }
}

/**
 * Starts `binary` detached, in its own session with its own log file and no pipe to us, so it
 * outlives the CLI; resolves with its PID.
 */
export async function spawnDetached(binary: string, args: string[], logFile: string): Promise<number> {
  // etcd logs keys it refuses and peers' addresses: readable by the owner only.
  const log = openSync(logFile, 'a', 0o600);
  fchmodSync(log, 0o600);
  try {
    const child = spawn(binary, args, { detached: true, stdio: ['ignore', log, log], env: withoutEtcdVariables() });
    await once(child, 'spawn');
    child.unref();
    if (child.pid === undefined) throw new Error(`${binary} did not start`);
    return child.pid;
  } finally {
    closeSync(log);
  }
}

export function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ESRCH') throw error;
  }
}

/** etcd reads ETCD_* variables as flags; ours must not be overridden by the caller's environment. */
export function withoutEtcdVariables(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([key]) => !key.startsWith('ETCD_')));
}

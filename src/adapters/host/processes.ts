import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { closeSync, fchmodSync, openSync, readdirSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { isExiting, isProcessAlive, processArguments } from './process-status.ts';

/**
 * Processes fastplane runs on this host (etcd members, Kubernetes components): started detached,
 * found and stopped by PID and a marker, an argument of their command line that names what only that
 * process uses (an etcd member's data dir, a component's certificate or kubeconfig).
 */

const POLL_MS = 100;

/** The recorded PID is still our process: alive, and its command line names the marker (PID reuse). */
export function isOurProcess(pid: number, marker: string): boolean {
  return isProcessAlive(pid) && processArguments(pid).includes(marker);
}

/** PIDs of live processes whose command line names the marker (found by scanning /proc). */
export function pidsUsing(marker: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .map(Number)
    .filter((pid) => isOurProcess(pid, marker));
}

/**
 * Sends SIGTERM, waits up to graceMs, then SIGKILL; resolves once the process has exited, its ports
 * closed, so that a member started next on the same address can bind them.
 */
export async function stopProcess(pid: number, marker: string, graceMs: number): Promise<void> {
  if (isOurProcess(pid, marker)) {
    signal(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (isOurProcess(pid, marker) && Date.now() < deadline) await sleep(POLL_MS);
    if (isOurProcess(pid, marker)) signal(pid, 'SIGKILL');
  }
  // Its command line empties before its sockets close (see isExiting).
  const killDeadline = Date.now() + 5000;
  while (isOurProcess(pid, marker) || isExiting(pid)) {
    if (Date.now() > killDeadline) throw new Error(`process ${String(pid)} (${marker}) survived SIGKILL`);
    await sleep(POLL_MS / 5);
  }
}

/**
 * Starts `binary` detached, in its own session with its own log file and no pipe to us, so it
 * outlives the CLI; resolves with its PID.
 */
export async function spawnDetached(binary: string, args: string[], logFile: string): Promise<number> {
  // etcd logs keys it refuses and peers' addresses, and the apiserver its clients': readable by the owner only.
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

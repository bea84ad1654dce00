import { execFile } from 'node:child_process';
import { mkdir, readFile, rename, rm, stat } from 'node:fs/promises';
import { promisify } from 'node:util';
import { isProcessAlive, statFields } from '../host/process-status.ts';
import { isOurProcess, pidsUsing, signal, spawnDetached, stopProcess } from '../host/processes.ts';
import { withLock, writeFileAtomic } from '../state-files.ts';
import { askMaster } from './haproxy-cli.ts';

const run = promisify(execFile);

/** What `haproxy -c` said of a configuration file. */
export type ConfigCheck = { ok: true } | { ok: false; missing: boolean; output: string };

/** Whether a process runs, has exited but is not reaped yet (its sockets closed), or is gone. */
export type ProcessState = 'running' | 'zombie' | 'gone';

/**
 * The host HAProxy runs on, as the endpoint needs it: its files, its processes and HAProxy's master
 * CLI. This host (the local provider's endpoint), or a host reached over SSH (the ssh provider's
 * endpoint host): one endpoint, two hosts. A process is ours when one of its arguments is exactly the
 * marker (the endpoint's folder, which HAProxy gets with `-C`).
 */
export interface HaproxyHost {
  mkdir(dir: string): Promise<void>;
  /** The file's text; undefined when it does not exist. */
  readText(path: string): Promise<string | undefined>;
  /** Written whole or not at all. */
  writeText(path: string, text: string, mode: number): Promise<void>;
  rename(from: string, to: string): Promise<void>;
  remove(path: string): Promise<void>;
  /** The file's size in bytes; 0 when it does not exist. */
  size(path: string): Promise<number>;
  check(binary: string, configFile: string): Promise<ConfigCheck>;
  /** Started detached, in its own session, its output appended to logFile; its PID. */
  spawn(binary: string, args: string[], logFile: string): Promise<number>;
  isOurs(pid: number, marker: string): Promise<boolean>;
  state(pid: number): Promise<ProcessState>;
  pidsUsing(marker: string): Promise<number[]>;
  /** SIGTERM, SIGKILL after graceMs; resolves once it is gone. */
  stop(pid: number, marker: string, graceMs: number): Promise<void>;
  signal(pid: number, name: 'SIGUSR2' | 'SIGKILL'): Promise<void>;
  /** One command to HAProxy's master CLI on its unix socket; the answer. */
  ask(socket: string, command: string): Promise<string>;
  /** Runs fn while no other process of this host holds `lockFile` (the endpoint's writers are serialized). */
  lock<T>(lockFile: string, fn: () => Promise<T>): Promise<T>;
}

/** This host: HAProxy a child of fastplane's own process, detached. */
export const LOCAL_HAPROXY_HOST: HaproxyHost = {
  mkdir: async (dir) => {
    await mkdir(dir, { recursive: true, mode: 0o700 });
  },
  readText: (path) => readFile(path, 'utf8').catch(() => undefined),
  writeText: (path, text, mode) => writeFileAtomic(path, text, mode),
  rename: (from, to) => rename(from, to),
  remove: (path) => rm(path, { force: true }),
  size: async (path) => (await stat(path).catch(() => undefined))?.size ?? 0,
  check: async (binary, configFile) => {
    try {
      await run(binary, ['-c', '-f', configFile]);
      return { ok: true };
    } catch (error) {
      const { code, stderr, stdout } = error as NodeJS.ErrnoException & { stderr?: string; stdout?: string };
      return { ok: false, missing: code === 'ENOENT' || code === 'EACCES', output: `${stdout ?? ''}${stderr ?? ''}` };
    }
  },
  spawn: (binary, args, logFile) => spawnDetached(binary, args, logFile),
  isOurs: (pid, marker) => Promise.resolve(isOurProcess(pid, marker)),
  state: (pid) => Promise.resolve(!isProcessAlive(pid) ? 'gone' : statFields(`/proc/${String(pid)}/stat`)?.[0] === 'Z' ? 'zombie' : 'running'),
  pidsUsing: (marker) => Promise.resolve(pidsUsing(marker)),
  stop: (pid, marker, graceMs) => stopProcess(pid, marker, graceMs),
  signal: (pid, name) => {
    signal(pid, name);
    return Promise.resolve();
  },
  ask: (socket, command) => askMaster(socket, command),
  lock: (lockFile, fn) => withLock(lockFile, fn),
};

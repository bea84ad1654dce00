import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import Database from 'better-sqlite3';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../src/domain/machine.ts';
import { BUILT_CLI, ensureBuiltCli } from './built-cli.ts';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';

const ROOT = join(import.meta.dirname, '..', '..');
await ensureBuiltCli();

export interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  ms: number;
}

/** PIDs of processes whose command line mentions this folder (the members of a test's state dir). */
export function pidsUnder(dir: string): number[] {
  const pids: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').includes(dir)) pids.push(Number(entry));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids.filter((pid) => pid !== process.pid);
}

/** Whether `pid` runs: it exists and is not a zombie waiting to be reaped. */
export function isRunning(pid: number | undefined): boolean {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return !readFileSync(`/proc/${String(pid)}/stat`, 'utf8').includes(') Z ');
  } catch {
    return false;
  }
}

/**
 * A private state dir and loopback range for one test, so test files never share addresses, and a
 * cleanup that stops every process started under it, by PID.
 */
export class CliEnv {
  readonly stateDir = mkdtempSync(join(tmpdir(), 'fastplane-test-'));

  constructor(readonly addressPrefix: string) {}

  /** Starts the CLI in the background; `done` settles when it exits. */
  start(args: string[], extraEnv: Record<string, string> = {}): { child: ChildProcess; done: Promise<CliRun> } {
    const started = Date.now();
    const child = spawn(process.execPath, [BUILT_CLI, ...args], {
      cwd: ROOT,
      env: { ...process.env, FASTPLANE_HOME: this.stateDir, FASTPLANE_TEST_HOOKS: '1', FASTPLANE_ADDRESS_PREFIX: this.addressPrefix, ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const done = new Promise<CliRun>((resolve, reject) => {
      child.on('error', reject);
      child.on('close', (code, signal) => {
        resolve({ code, signal, stdout, stderr, ms: Date.now() - started });
      });
    });
    return { child, done };
  }

  run(args: string[], extraEnv: Record<string, string> = {}): Promise<CliRun> {
    return this.start(args, extraEnv).done;
  }

  /** Rows of one table straight from the state dir's SQLite file, read-only (tests read beside a running CLI). */
  private rows<T>(sql: string, ...params: string[]): T[] {
    const path = join(this.stateDir, 'fastplane.db');
    if (!existsSync(path)) return [];
    const db = new Database(path, { readonly: true, fileMustExist: true });
    try {
      db.pragma('busy_timeout = 5000');
      return db
        .prepare<string[], { record: string }>(sql)
        .all(...params)
        .map((row) => JSON.parse(row.record) as T);
    } catch (error) {
      // The CLI creates the file before its schema: a reader that comes in between sees no records yet.
      if (error instanceof Error && error.message.startsWith('no such table')) return [];
      throw error;
    } finally {
      db.close();
    }
  }

  /** Writes a ControlPlane manifest into the state dir and returns its path. */
  writeManifest(name: string, spec: Record<string, unknown>): string {
    const path = join(this.stateDir, `${name}.json`);
    writeFileSync(path, JSON.stringify({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name }, spec }));
    return path;
  }

  /** Events recorded for a cluster, read straight from the state store. */
  events(cluster: string): EventRecord[] {
    return this.rows<EventRecord>('SELECT record FROM events WHERE cluster = ? ORDER BY id', cluster);
  }

  /** Machine records of a cluster, straight from the state store. */
  machines(cluster: string): MachineRecord[] {
    return this.rows<MachineRecord>('SELECT record FROM machines WHERE cluster = ? ORDER BY ordinal, name', cluster);
  }

  /**
   * The machine of that name was deleted: its DeleteMachine succeeded, and any machine of that name
   * now is a later one (freed ordinals, so names, are reused).
   */
  wasDeleted(cluster: string, name: string): boolean {
    const deletedAt = this.events(cluster).filter((e) => e.action === 'DeleteMachine' && e.machine === name && e.outcome === 'Succeeded').map((e) => e.at);
    if (deletedAt.length === 0) return false;
    const now = this.machines(cluster).find((m) => m.name === name);
    return now === undefined || now.createdAt >= Math.max(...deletedAt);
  }

  /** Names of the control planes on record. */
  controlPlanes(): string[] {
    return this.controlPlaneRecords().map((cp) => cp.name);
  }

  controlPlaneRecords(): ControlPlaneRecord[] {
    return this.rows<ControlPlaneRecord>('SELECT record FROM control_planes ORDER BY created_at, name');
  }

  cleanup(): void {
    for (const pid of pidsUnder(this.stateDir)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Already gone.
      }
    }
    rmSync(this.stateDir, { recursive: true, force: true });
  }
}

export const MEMBERSHIP_ACTIONS = new Set(['InitCluster', 'AddLearner', 'StartMember', 'PromoteLearner', 'MoveLeader', 'RemoveMember']);

/** Membership changes that took effect, in start order, from the event log. */
export function membershipChanges(events: EventRecord[]): EventRecord[] {
  return events.filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action) && e.outcome === 'Succeeded').sort((a, b) => a.at - b.at);
}

/**
 * The most learners etcd accepted at once for these machines: the lowest --max-learners their members
 * were started with (1 where none is recorded, and on etcd below 3.6).
 */
export function learnerLimitOf(machines: readonly MachineRecord[]): number {
  const limits = machines.map((m) => (Number(m.version.split('.')[1]) < 6 ? 1 : (m.maxLearners ?? 1)));
  return limits.length === 0 ? 1 : Math.min(...limits);
}

/** The status document a `-o json` run printed. */
export function statusOf(stdout: string): ControlPlaneStatusDocument {
  return JSON.parse(stdout) as ControlPlaneStatusDocument;
}

/** Makes CliEnvs that are all cleaned up (their processes stopped by PID) after the test file. */
export function cliEnvFactory(): (addressPrefix: string) => CliEnv {
  const envs: CliEnv[] = [];
  after(() => {
    for (const env of envs) env.cleanup();
  });
  return (addressPrefix) => {
    const env = new CliEnv(addressPrefix);
    envs.push(env);
    return env;
  };
}

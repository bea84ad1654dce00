import assert from 'node:assert/strict';
import { spawnSync, type ChildProcess } from 'node:child_process';
import { setTimeout as sleep } from 'node:timers/promises';
import type { EventRecord } from '../../src/domain/machine.ts';
import type { CliEnv, CliRun } from './cli.ts';

/** One pino line of a controller's stdout (the fields the tests read). */
export interface ControllerLine {
  time: number;
  msg: string;
  cluster?: string;
  generation?: number;
  holder?: string;
  why?: string;
  /** Set on the line of every event the replica recorded. */
  event?: EventRecord;
}

/** A `fastplane controller` process and the log lines it printed so far. */
export interface ControllerReplica {
  child: ChildProcess;
  done: Promise<CliRun>;
  lines: ControllerLine[];
}

/** Starts `fastplane ARGS` (a controller) under the env and collects its JSON log lines from stdout. */
export function startController(env: CliEnv, args: string[], extraEnv: Record<string, string> = {}): ControllerReplica {
  const { child, done } = env.start(args, extraEnv);
  const lines: ControllerLine[] = [];
  let partial = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    const parts = (partial + chunk.toString()).split('\n');
    partial = parts.pop() ?? '';
    for (const line of parts) if (line.trim() !== '') lines.push(JSON.parse(line) as ControllerLine);
  });
  return { child, done, lines };
}

/**
 * Stops a replica by its PID: SIGCONT first (a stopped process would keep a SIGTERM pending), then
 * SIGKILL; resolves when it has exited.
 */
export async function killReplica(replica: ControllerReplica): Promise<void> {
  if (replica.child.exitCode !== null || replica.child.signalCode !== null) return;
  replica.child.kill('SIGCONT');
  replica.child.kill('SIGKILL');
  await replica.done;
}

/** Polls `check` every `everyMs` until it gives a value; fails the test after `ms`. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined> | T | undefined, ms = 90_000, everyMs = 200): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** An HTTP GET's status and body, or undefined while nothing listens. */
export async function httpGet(url: string): Promise<{ status: number; body: string } | undefined> {
  try {
    const response = await fetch(url);
    return { status: response.status, body: await response.text() };
  } catch {
    return undefined;
  }
}

/**
 * The environment Debian's `faketime -f OFFSET` gives the command it runs (libfaketime preloaded), so
 * that a replica's wall and monotonic clocks run OFFSET ahead of everyone else's. Its per-run shared
 * memory is left out (it goes away with that faketime process; a fixed offset needs none), and the
 * offset is read on every call rather than cached.
 */
export function clockOffsetEnv(offset: string): Record<string, string> {
  const run = spawnSync('faketime', ['-f', offset, 'env', '-0'], { encoding: 'utf8' });
  if (run.error !== undefined || run.status !== 0) {
    assert.fail(`faketime -f ${offset} did not run (scripts/install-test-tools.sh installs it): ${run.error?.message ?? run.stderr}`);
  }
  const wanted = new Set(['LD_PRELOAD', 'FAKETIME']);
  const pairs = run.stdout.split('\0').map((entry) => [entry.slice(0, entry.indexOf('=')), entry.slice(entry.indexOf('=') + 1)] as const);
  const found = Object.fromEntries(pairs.filter(([name]) => wanted.has(name)));
  assert.deepEqual(Object.keys(found).sort(), [...wanted].sort(), `faketime sets ${[...wanted].join(' and ')}`);
  return { ...found, FAKETIME_NO_CACHE: '1' };
}

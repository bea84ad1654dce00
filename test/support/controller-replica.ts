import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
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
export function startController(env: CliEnv, args: string[]): ControllerReplica {
  const { child, done } = env.start(args);
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

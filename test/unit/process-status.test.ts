import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import { isExiting, isProcessAlive, processArguments } from '../../src/adapters/providers/local/process-status.ts';

const started: number[] = [];
after(() => {
  for (const pid of started) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

const stateOf = (pid: number): string => {
  const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
};

describe('process status read from /proc', () => {
  test('a running process is alive, shows its arguments and is not exiting', async () => {
    const child = spawn('sleep', ['30'], { stdio: 'ignore' });
    await once(child, 'spawn');
    const pid = child.pid!;
    started.push(pid);
    assert.equal(isProcessAlive(pid), true);
    assert.deepEqual(processArguments(pid), ['sleep', '30']);
    assert.equal(isExiting(pid), false);
  });

  test('a zombie still exists but has no arguments and has finished exiting (its sockets are closed)', async () => {
    // The shell becomes `sleep 30` and never reaps its first child, which stays a zombie.
    const shell = spawn('sh', ['-c', 'sleep 0 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
    started.push(shell.pid!);
    const [line] = (await once(shell.stdout, 'data')) as [Buffer];
    const zombie = Number(line.toString().trim());
    for (let i = 0; i < 100 && stateOf(zombie) !== 'Z'; i += 1) await sleep(20);
    assert.equal(stateOf(zombie), 'Z');
    assert.equal(isProcessAlive(zombie), true);
    assert.deepEqual(processArguments(zombie), []);
    assert.equal(isExiting(zombie), false);
  });

  test('a reaped process, and pids that name no single process, are gone', () => {
    const done = spawnSync('true');
    assert.equal(done.status, 0);
    assert.equal(isProcessAlive(done.pid), false);
    assert.deepEqual(processArguments(done.pid), []);
    assert.equal(isExiting(done.pid), false);
    for (const pid of [0, -1, 1.5]) assert.equal(isProcessAlive(pid), false);
  });
});

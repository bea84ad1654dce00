import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, copyFileSync, mkdtempSync, readFileSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, describe, test } from 'node:test';
import { isProvenGone, ownIdentity, processStartTime } from '../../src/adapters/host/process-identity.ts';
import { isExiting, isProcessAlive, processArguments } from '../../src/adapters/host/process-status.ts';

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
    // 'spawn' comes once the fork is done; the exec of sleep may still be under way on a busy machine.
    for (let i = 0; i < 200 && processArguments(pid).length === 0; i++) await sleep(10);
    assert.deepEqual(processArguments(pid), ['sleep', '30']);
    assert.equal(isExiting(pid), false);
  });

  test('a zombie still exists but has no arguments and has finished exiting (its sockets are closed)', async () => {
    // The shell becomes `sleep 30` and never reaps its first child, which stays a zombie. The child
    // outlives the exec: one that exits before it may still be reaped by the shell.
    const shell = spawn('sh', ['-c', 'sleep 0.3 & echo $!; exec sleep 30'], { stdio: ['ignore', 'pipe', 'ignore'] });
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

describe('process identity: a holder is proven gone only on this boot, in this PID namespace', () => {
  const self = () => {
    const identity = ownIdentity();
    assert.ok(identity, 'this process has an identity');
    return identity;
  };

  test("this process's identity is what /proc says of it", () => {
    const identity = self();
    assert.equal(identity.bootId, readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim());
    assert.equal(identity.pidNamespace, readlinkSync('/proc/self/ns/pid'));
    assert.match(identity.pidNamespace, /^pid:\[\d+\]$/);
    assert.equal(identity.pid, process.pid);
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]?.split(' ') ?? [];
    assert.equal(identity.startTime, Number(fields[22 - 3]), 'field 22 of /proc/self/stat');
    assert.equal(isProvenGone(identity), false, 'this process runs');
  });

  test('a child of ours is gone once reaped, and not before; its start time is read whatever its name', async () => {
    // A command name with a space and a ')' in it, as /proc/PID/stat shows it between parentheses.
    const dir = mkdtempSync(join(tmpdir(), 'fastplane-comm-'));
    const odd = join(dir, 'sl) eep');
    copyFileSync('/bin/sleep', odd);
    chmodSync(odd, 0o755);
    try {
      const child = spawn(odd, ['30'], { stdio: 'ignore' });
      await once(child, 'spawn');
      const pid = child.pid!;
      started.push(pid);
      const startTime = processStartTime(pid);
      assert.ok(startTime !== undefined && startTime >= self().startTime, `a start time after ours: ${String(startTime)}`);
      const identity = { ...self(), pid, startTime };
      assert.equal(isProvenGone(identity), false);
      assert.equal(isProvenGone({ ...identity, startTime: startTime - 1 }), true, 'the same PID, started at another time: reused');
      child.kill('SIGKILL');
      await once(child, 'exit');
      assert.equal(processStartTime(pid), undefined);
      assert.equal(isProvenGone(identity), true, 'its PID is free');
      assert.equal(isProvenGone({ ...identity, bootId: '00000000-0000-4000-8000-000000000000' }), false, 'another boot (or host): nothing proven');
      assert.equal(isProvenGone({ ...identity, pidNamespace: 'pid:[1]' }), false, 'another PID namespace: nothing proven');
      assert.equal(isProvenGone(undefined), false, 'no identity: nothing proven');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

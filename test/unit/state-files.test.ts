import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, test } from 'node:test';
import { mkdir, readFile } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { ownIdentity } from '../../src/adapters/host/process-identity.ts';
import { withLock } from '../../src/adapters/state-files.ts';
import { StoredClusterState } from '../../src/adapters/stored-cluster-state.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';

const dir = mkdtempSync(join(tmpdir(), 'fastplane-lock-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

/** The PID of a process that ran and exited. */
function deadPid(): number {
  const child = spawnSync('sh', ['-c', 'echo $$'], { encoding: 'utf8' });
  return Number(child.stdout.trim());
}

/** A lock file as withLock writes it, naming a process of this boot and PID namespace (or of another). */
function lockOf(pid: number, other: { bootId?: string } = {}): string {
  const identity = ownIdentity();
  assert.ok(identity, 'this process has an identity');
  return `${JSON.stringify({ token: 'left-behind', pid, identity: { ...identity, pid, ...other } })}\n`;
}

describe('withLock', () => {
  test('a lock left by a process of this host that no longer runs is taken over at once', async () => {
    const path = join(dir, 'dead.lock');
    writeFileSync(path, lockOf(deadPid()));
    const started = Date.now();
    const value = await withLock(path, () => Promise.resolve('ran'));
    assert.equal(value, 'ran');
    assert.ok(Date.now() - started < 5_000, 'not waited out');
    assert.equal(existsSync(path), false, 'released');
  });

  test('a lock naming a PID free here, but of another boot or with no identity (an older lock), is waited for', async () => {
    const path = join(dir, 'foreign.lock');
    for (const content of [lockOf(deadPid(), { bootId: '00000000-0000-4000-8000-000000000000' }), `${String(deadPid())} left-behind\n`]) {
      writeFileSync(path, content);
      let ran = false;
      const waiting = withLock(path, () => {
        ran = true;
        return Promise.resolve();
      });
      await sleep(300);
      assert.equal(ran, false, `its holder is not proven gone: ${content}`);
      rmSync(path);
      await waiting;
      assert.equal(ran, true);
    }
  });

  test("a live holder's lock is waited for; holders never overlap", async () => {
    const path = join(dir, 'live.lock');
    let inside = 0;
    let most = 0;
    const critical = async (): Promise<void> => {
      inside += 1;
      most = Math.max(most, inside);
      await sleep(30);
      inside -= 1;
    };
    await Promise.all(Array.from({ length: 8 }, () => withLock(path, critical)));
    assert.equal(most, 1);

    // Held by this (live) process under another token: the second caller waits until it is removed.
    writeFileSync(path, `${String(process.pid)} other-holder\n`);
    let ran = false;
    const waiting = withLock(path, () => {
      ran = true;
      return Promise.resolve();
    });
    await sleep(300);
    assert.equal(ran, false, 'waited for the live holder');
    rmSync(path);
    await waiting;
    assert.equal(ran, true);
  });

  test('a holder that is alive but frozen for longer than 10 s keeps its lock', { timeout: 120_000 }, async () => {
    const path = join(dir, 'frozen.lock');
    const done = join(dir, 'frozen.done');
    const script = join(dir, 'holder.mts');
    const stateFiles = fileURLToPath(new URL('../../src/adapters/state-files.ts', import.meta.url));
    writeFileSync(script, [
      `import { existsSync } from 'node:fs';`,
      `import { withLock } from ${JSON.stringify(stateFiles)};`,
      `await withLock(${JSON.stringify(path)}, async () => {`,
      `  console.log('held');`,
      `  while (!existsSync(${JSON.stringify(done)})) await new Promise((resolve) => setTimeout(resolve, 20));`,
      `});`,
    ].join('\n'));
    const holder = spawn(process.execPath, ['--import', 'tsx', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    const pid = holder.pid;
    assert.ok(pid !== undefined);
    try {
      await new Promise<void>((resolve, reject) => {
        holder.stdout.on('data', (chunk: Buffer) => { if (chunk.toString().includes('held')) resolve(); });
        holder.once('exit', () => { reject(new Error('the holder exited before it held the lock')); });
      });
      const held = readFileSync(path, 'utf8');
      process.kill(pid, 'SIGSTOP');
      let ran = false;
      const waiting = withLock(path, () => {
        ran = true;
        return Promise.resolve();
      });
      await sleep(12_000);
      assert.equal(ran, false, 'the frozen holder still holds the lock');
      assert.equal(readFileSync(path, 'utf8'), held, 'its lock file is untouched');
      process.kill(pid, 'SIGCONT');
      writeFileSync(done, '');
      await once(holder, 'exit');
      await waiting;
      assert.equal(ran, true, 'taken once the holder let go');
    } finally {
      if (holder.exitCode === null && holder.signalCode === null) {
        process.kill(pid, 'SIGCONT');
        process.kill(pid, 'SIGKILL');
      }
    }
  });

  test("a lock under a lease fence: a higher fence breaks a live holder's lower one after the bound, a lower or equal one waits", async () => {
    const holder = (fence: number): string => `${lockOf(process.pid).trimEnd().slice(0, -1)},"fence":${String(fence)}}\n`;
    /** Asks for a lock held by fence 5 with `fence`; whether it was taken within 1.5 s, and the call itself. */
    const attempt = async (name: string, fence: number): Promise<{ taken: boolean; call: Promise<void> }> => {
      const path = join(dir, name);
      writeFileSync(path, holder(5));
      let taken = false;
      const call = withLock(path, () => Promise.resolve(void (taken = true)), { fence, breakDeposedAfterMs: 300 });
      await Promise.race([call, sleep(1_500)]);
      return { taken, call };
    };
    const same = await attempt('fence-same.lock', 5);
    const lower = await attempt('fence-lower.lock', 4);
    assert.equal(same.taken, false, 'the same fence waits: its holder is not deposed');
    assert.equal(lower.taken, false, 'a lower fence waits');
    assert.equal(readFileSync(join(dir, 'fence-same.lock'), 'utf8'), holder(5));
    const started = performance.now();
    const higher = await attempt('fence-higher.lock', 6);
    assert.equal(higher.taken, true, 'a higher fence breaks it');
    assert.ok(performance.now() - started >= 300, 'but only after the bound');
    assert.equal(existsSync(join(dir, 'fence-higher.lock')), false, 'and releases its own lock');
    // The holder lets go: the waiting calls take their locks and end.
    rmSync(join(dir, 'fence-same.lock'));
    rmSync(join(dir, 'fence-lower.lock'));
    await Promise.all([same.call, lower.call]);
  });

  test("releasing a lock that another holder's lock replaced leaves the other's lock in place", async () => {
    const path = join(dir, 'replaced.lock');
    const other = lockOf(process.pid);
    await withLock(path, () => {
      writeFileSync(path, other);
      return Promise.resolve();
    });
    assert.equal(readFileSync(path, 'utf8'), other, "the other holder's lock is kept");
    rmSync(path);
  });

  test('a read (status) while a writer holds the lock does not wait for it and writes nothing', { timeout: 30_000 }, async () => {
    const store = new MemoryStateStore();
    const state = new StoredClusterState(store, 'local-process/c', join(dir, 'clusters', 'c'));
    const ca = join(state.cacheDir, 'pki', 'ca.crt');
    await state.withFiles(['pki'], async () => {
      await mkdir(join(state.cacheDir, 'pki'), { recursive: true });
      writeFileSync(ca, 'CA-1');
    });
    const stored = await store.listDocuments('local-process/c');
    let letGo = (): void => undefined;
    let entered = (): void => undefined;
    const inChange = new Promise<void>((resolve) => { entered = resolve; });
    const writing = state.withFiles(['pki'], async () => {
      // A change in progress: the new CA is written here, not stored yet.
      writeFileSync(ca, 'CA-2 being written');
      const released = new Promise<void>((resolve) => { letGo = resolve; });
      entered();
      await released;
    });
    await inChange;
    const writes: string[] = [];
    const watched = new StoredClusterState({
      getDocument: (scope, key) => store.getDocument(scope, key),
      listDocuments: (scope) => store.listDocuments(scope),
      putDocument: (scope, key) => { writes.push(key); return Promise.reject(new Error('a read wrote')); },
      deleteDocument: (scope, key) => { writes.push(key); return Promise.reject(new Error('a read wrote')); },
      putDocuments: (scope, puts) => { writes.push(...puts.map((p) => p.key)); return Promise.reject(new Error('a read wrote')); },
    }, 'local-process/c', state.cacheDir);
    // Were the read to wait for the writer's lock, it would never end (the writer waits for it): the case times out.
    const read = await watched.readFiles((root) => readFile(join(root, 'pki', 'ca.crt'), 'utf8'));
    assert.equal(read, 'CA-1', 'the stored CA, read at once');
    assert.deepEqual(writes, [], 'nothing stored');
    assert.equal(readFileSync(ca, 'utf8'), 'CA-2 being written', "the writer's copy is left alone");
    assert.deepEqual(await store.listDocuments('local-process/c'), stored);
    letGo();
    await writing;
  });
});

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { cpuMeter } from '../../scripts/test-cpu.ts';

// The runner schedules files by their CPU, so a file whose work runs in detached processes (etcd,
// kube-apiserver, the lab's sshd) must be charged for it: here a child that leaves its parent's
// tree (setsid, parent gone at once) spins until it has used a second of CPU by its own count, which
// holds on a loaded machine too, then marks a file the test's command waits for.
const SPINNER = "const s = process.cpuUsage(); while (process.cpuUsage(s).user < 1e6); require('fs').writeFileSync(process.argv[1], '')";

test('the test runner counts the CPU of a process the file detached', () => {
  const meter = cpuMeter();
  const dir = mkdtempSync(join(tmpdir(), 'fastplane-test-cpu-'));
  try {
    const done = join(dir, 'done');
    const file = 'test/unit/detached-spinner.test.ts';
    const script = `(setsid "${process.execPath}" -e "$0" "$1" &) ; while [ ! -e "$1" ]; do sleep 0.1; done`;
    const [command, ...args] = meter.command(file, ['sh', '-c', script, SPINNER, done]);
    const run = spawnSync(command!, args, { stdio: 'ignore', timeout: 60_000 });
    assert.equal(run.status, 0);
    const seconds = meter.cpuSeconds(file, '');
    assert.ok(seconds !== undefined && seconds >= 0.95, `${meter.description}: ${String(seconds)} CPU seconds counted for the detached spinner (it used at least 1 s)`);
  } finally {
    meter.close();
    rmSync(dir, { recursive: true, force: true });
  }
});

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { cpuMeter } from '../../scripts/test-cpu.ts';

// The runner schedules files by their CPU, so a file whose work runs in detached processes (etcd,
// kube-apiserver, the lab's sshd) must be charged for it: here a child that leaves its parent's
// tree (setsid, parent gone at once) and spins for a second is counted.
test('the test runner counts the CPU of a process the file detached', () => {
  const meter = cpuMeter();
  try {
    const file = 'test/unit/detached-spinner.test.ts';
    const [command, ...args] = meter.command(file, ['sh', '-c', '(setsid sh -c \'end=$(($(date +%s)+2)); while [ "$(date +%s)" -lt "$end" ]; do :; done\' &) ; sleep 3']);
    const run = spawnSync(command!, args, { stdio: 'ignore' });
    assert.equal(run.status, 0);
    const seconds = meter.cpuSeconds(file, '');
    assert.ok(seconds !== undefined && seconds >= 0.5, `${meter.description}: ${String(seconds)} CPU seconds counted for the detached spinner`);
  } finally {
    meter.close();
  }
});

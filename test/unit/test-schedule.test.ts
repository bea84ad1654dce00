import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { MachineLoad } from '../../scripts/test-cpu.ts';
import { BUSY_LIMIT, coresUsed, maxFilesAtOnce, mayStart, UNMEASURED_CORES } from '../../scripts/test-schedule.ts';

/** Cores each file keeps busy, as measured; a file not listed was never measured. */
const LOAD: Record<string, number> = {
  'test/e2e/lifecycle.test.ts': 0.3,
  'test/e2e/replacements.test.ts': 0.4,
  'test/e2e/recover.test.ts': 0.5,
  'test/e2e/ssh-lab.test.ts': 0.2,
  'test/chaos/chaos.test.ts': 0.6,
  'test/sim/scenarios.test.ts': 0.2,
  'test/property/invariants.test.ts': 1,
};
const coresOf = (file: string): number => LOAD[file] ?? UNMEASURED_CORES;
const CORES = 2;

describe('test schedule: which file may start beside the running ones', () => {
  test('a file always starts when nothing runs, even one that needs more than the machine, on a busy machine', () => {
    assert.equal(mayStart('test/e2e/new.test.ts', [], () => 5, CORES, CORES), true);
  });

  test('files that wait more than they compute run more at once than there are cores, up to one more', () => {
    assert.equal(maxFilesAtOnce(CORES), 3);
    assert.equal(mayStart('test/e2e/ssh-lab.test.ts', ['test/e2e/lifecycle.test.ts', 'test/e2e/replacements.test.ts'], coresOf, CORES), true);
    const three = ['test/e2e/lifecycle.test.ts', 'test/e2e/replacements.test.ts', 'test/e2e/recover.test.ts'];
    assert.equal(mayStart('test/e2e/ssh-lab.test.ts', three, coresOf, CORES), false, 'a fourth file waits although 1.2 + 0.2 cores fit 2');
  });

  test('a file waits while the running files and it would need more cores than the machine has', () => {
    assert.equal(mayStart('test/property/invariants.test.ts', ['test/e2e/recover.test.ts', 'test/e2e/lifecycle.test.ts'], coresOf, CORES), true, '0.5 + 0.3 + 1 cores');
    assert.equal(mayStart('test/e2e/new.test.ts', ['test/e2e/recover.test.ts', 'test/property/invariants.test.ts'], coresOf, CORES), false, `0.5 + 1 + ${String(UNMEASURED_CORES)} (never measured) cores`);
  });

  test('three files never measured run at once on two cores, as e2e files that wait on processes do', () => {
    assert.equal(mayStart('test/e2e/new-c.test.ts', ['test/e2e/new-a.test.ts', 'test/e2e/new-b.test.ts'], coresOf, CORES), true);
    assert.equal(mayStart('test/e2e/new-c.test.ts', ['test/e2e/new-a.test.ts', 'test/property/invariants.test.ts'], coresOf, CORES), false, '0.65 + 1 + 0.65 cores');
  });

  test('no file starts beside others while the machine is measured busier than the limit', () => {
    const limit = CORES * BUSY_LIMIT;
    assert.equal(mayStart('test/e2e/ssh-lab.test.ts', ['test/e2e/lifecycle.test.ts'], coresOf, CORES, limit + 0.1), false);
    assert.equal(mayStart('test/e2e/ssh-lab.test.ts', ['test/e2e/lifecycle.test.ts'], coresOf, CORES, limit - 0.1), true);
    assert.equal(mayStart('test/unit/health.test.ts', ['test/property/invariants.test.ts'], () => 0.5, CORES, CORES), true, 'files of the fast lane only compute: a busy machine stretches them, nothing more');
    assert.equal(mayStart('test/e2e/ssh-lab.test.ts', ['test/property/invariants.test.ts'], () => 0.5, CORES, CORES), false);
  });

  test('a CPU-heavy file never starts beside a timing-sensitive one, however little both use', () => {
    assert.equal(mayStart('test/sim/scenarios.test.ts', ['test/chaos/chaos.test.ts'], coresOf, CORES), false);
    assert.equal(mayStart('test/chaos/chaos.test.ts', ['test/sim/scenarios.test.ts'], coresOf, CORES), false);
    assert.equal(mayStart('test/chaos/chaos.test.ts', ['test/e2e/lifecycle.test.ts'], coresOf, CORES), true);
  });

  test('a file uses its CPU seconds over its wall seconds, never more than a core; one never measured for CPU, the default', () => {
    assert.equal(coresUsed({ seconds: 200, cpuSeconds: 50, source: 'measured' }), 0.25);
    assert.equal(coresUsed({ seconds: 200, source: 'measured' }), UNMEASURED_CORES);
    assert.equal(coresUsed(undefined), UNMEASURED_CORES);
    assert.equal(coresUsed({ seconds: 0.5, cpuSeconds: 1.2, source: 'measured' }), 1, 'never more than one core: two files still share two cores');
  });
});

test('the machine\'s load counts a process that spins, whoever started it', async () => {
  const load = new MachineLoad();
  const spinner = spawn('sh', ['-c', 'while :; do :; done'], { stdio: 'ignore' });
  try {
    await sleep(4_500);
    assert.ok(load.busyCores() >= 0.7, `${load.busyCores().toFixed(2)} cores busy while one spins`);
  } finally {
    spinner.kill('SIGKILL');
    load.stop();
  }
});

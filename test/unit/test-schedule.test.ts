import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { coresUsed, maxFilesAtOnce, mayStart } from '../../scripts/test-schedule.ts';

/** Cores each file keeps busy, as measured; a file not listed is unknown and counts as one core. */
const LOAD: Record<string, number> = {
  'test/e2e/lifecycle.test.ts': 0.3,
  'test/e2e/replacements.test.ts': 0.4,
  'test/e2e/recover.test.ts': 0.5,
  'test/e2e/ssh-lab.test.ts': 0.2,
  'test/chaos/chaos.test.ts': 0.6,
  'test/e2e/package.test.ts': 0.2,
  'test/property/invariants.test.ts': 1,
};
const coresOf = (file: string): number => LOAD[file] ?? 1;
const CORES = 2;

describe('test schedule: which file may start beside the running ones', () => {
  test('a file always starts when nothing runs, even one that needs more than the machine', () => {
    assert.equal(mayStart('test/e2e/new.test.ts', [], () => 5, CORES), true);
  });

  test('files that wait more than they compute run more at once than there are cores, up to one more', () => {
    assert.equal(maxFilesAtOnce(CORES), 3);
    assert.equal(mayStart('test/e2e/ssh-lab.test.ts', ['test/e2e/lifecycle.test.ts', 'test/e2e/replacements.test.ts'], coresOf, CORES), true);
    const three = ['test/e2e/lifecycle.test.ts', 'test/e2e/replacements.test.ts', 'test/e2e/recover.test.ts'];
    assert.equal(mayStart('test/e2e/ssh-lab.test.ts', three, coresOf, CORES), false, 'a fourth file waits although 1.2 + 0.2 cores fit 2');
  });

  test('a file waits while the running files and it would need more cores than the machine has', () => {
    assert.equal(mayStart('test/e2e/new.test.ts', ['test/e2e/recover.test.ts', 'test/chaos/chaos.test.ts'], coresOf, CORES), false, '0.5 + 0.6 + 1 (unknown) cores');
    assert.equal(mayStart('test/e2e/new.test.ts', ['test/e2e/recover.test.ts', 'test/e2e/replacements.test.ts'], coresOf, CORES), true, '0.5 + 0.4 + 1 (unknown) cores');
  });

  test('the sum may reach the core count but not pass it: two unknown files run at once, as before', () => {
    assert.equal(mayStart('test/e2e/new-a.test.ts', ['test/e2e/new-b.test.ts'], coresOf, CORES), true);
    assert.equal(mayStart('test/e2e/new-a.test.ts', ['test/e2e/new-b.test.ts', 'test/e2e/ssh-lab.test.ts'], coresOf, CORES), false);
    assert.equal(mayStart('test/e2e/ssh-lab.test.ts', ['test/e2e/new-b.test.ts'], coresOf, CORES), true);
  });

  test('a CPU-heavy file never starts beside a timing-sensitive one, however little both use', () => {
    assert.equal(mayStart('test/e2e/package.test.ts', ['test/chaos/chaos.test.ts'], coresOf, CORES), false);
    assert.equal(mayStart('test/chaos/chaos.test.ts', ['test/e2e/package.test.ts'], coresOf, CORES), false);
    assert.equal(mayStart('test/chaos/chaos.test.ts', ['test/e2e/lifecycle.test.ts'], coresOf, CORES), true);
  });

  test('a file uses its CPU seconds over its wall seconds; one never measured for CPU counts as a full core, and none counts more', () => {
    assert.equal(coresUsed({ seconds: 200, cpuSeconds: 50, source: 'measured' }), 0.25);
    assert.equal(coresUsed({ seconds: 200, source: 'measured' }), 1);
    assert.equal(coresUsed(undefined), 1);
    assert.equal(coresUsed({ seconds: 0.5, cpuSeconds: 1.2, source: 'measured' }), 1, 'never more than one core: two files still share two cores');
  });
});

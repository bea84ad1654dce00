import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { laneOf, mayRunBeside, testFiles } from '../../scripts/test-lanes.ts';

const ROOT = join(import.meta.dirname, '..', '..');

describe('test lanes', () => {
  test('every test file of the tree is in a lane, this one in the fast lane', () => {
    const files = testFiles(ROOT);
    assert.ok(files.includes('test/unit/test-lanes.test.ts'), files.join('\n'));
    assert.deepEqual(files.filter((file) => laneOf(file) === undefined), []);
    assert.equal(laneOf('test/unit/test-lanes.test.ts'), 'fast');
  });

  test('a file goes by its folder, or by its name when listed: the contract on the model needs no etcd', () => {
    assert.equal(laneOf('test/contract/real-etcd.test.ts'), 'etcd');
    assert.equal(laneOf('test/contract/model-etcd.test.ts'), 'fast');
    assert.equal(laneOf('test/e2e/nested/new.test.ts'), 'e2e');
    assert.equal(laneOf('test/elsewhere/new.test.ts'), undefined, 'a file in an unknown folder is in no lane, and the runner stops on it');
  });

  test('a CPU-heavy file never starts beside a timing-sensitive one, nor the other way round', () => {
    assert.equal(mayRunBeside('test/property/invariants.test.ts', ['test/chaos/chaos.test.ts']), false);
    assert.equal(mayRunBeside('test/e2e/bench-lab.test.ts', ['test/sim/scenarios.test.ts']), false);
    assert.equal(mayRunBeside('test/e2e/bench-lab.test.ts', ['test/e2e/up.test.ts']), true);
    assert.equal(mayRunBeside('test/property/invariants.test.ts', ['test/property/limits.test.ts']), true);
    assert.equal(mayRunBeside('test/chaos/chaos.test.ts', []), true);
  });
});

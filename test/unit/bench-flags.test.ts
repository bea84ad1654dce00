import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidInputError } from '../../src/api/errors.ts';
import { parseBenchFlags, type BenchFlags } from '../../src/cli/bench.ts';

const flags = (over: Partial<BenchFlags> = {}): BenchFlags => ({ replicas: '5', provisioningDelay: '30s', runs: '1', modes: 'serial,parallel', timeout: '10m', output: 'json', ...over });

test('--modes: serial and parallel by default, any order, each once', () => {
  assert.deepEqual(parseBenchFlags(flags()).modes, ['serial', 'parallel']);
  assert.deepEqual(parseBenchFlags(flags({ modes: 'parallel' })).modes, ['parallel']);
  assert.deepEqual(parseBenchFlags(flags({ modes: 'parallel, serial,parallel' })).modes, ['parallel', 'serial']);
});

test('--modes: guarded is named as not available yet, anything else as invalid, with the other flags', () => {
  assert.throws(
    () => parseBenchFlags(flags({ modes: 'serial,guarded', runs: '0' })),
    (error: unknown) => {
      assert.ok(error instanceof InvalidInputError);
      assert.match(error.message, /--modes: guarded is not available yet/);
      assert.match(error.message, /--runs: must be a whole number/);
      return true;
    },
  );
  assert.throws(() => parseBenchFlags(flags({ modes: 'fast' })), /--modes: must be serial, parallel or both/);
  assert.throws(() => parseBenchFlags(flags({ modes: '' })), /--modes/);
});

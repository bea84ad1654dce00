import assert from 'node:assert/strict';
import { test } from 'node:test';
import { InvalidInputError } from '../../src/api/errors.ts';
import { parseBenchFlags, type BenchFlags } from '../../src/cli/commands/bench.ts';

const flags = (over: Partial<BenchFlags> = {}): BenchFlags => ({ replicas: '5', provisioningDelay: '30s', runs: '1', modes: 'serial,parallel', timeout: '10m', output: 'json', ...over });

test('--modes: serial, parallel, guarded, learners and guarded-learners, any order, each once', () => {
  assert.deepEqual(parseBenchFlags(flags({ modes: 'serial,parallel,guarded' })).modes, ['serial', 'parallel', 'guarded']);
  assert.deepEqual(parseBenchFlags(flags({ modes: 'learners,parallel,guarded-learners' })).modes, ['learners', 'parallel', 'guarded-learners']);
  assert.deepEqual(parseBenchFlags(flags({ modes: 'guarded' })).modes, ['guarded']);
  assert.deepEqual(parseBenchFlags(flags({ modes: 'guarded, serial,guarded' })).modes, ['guarded', 'serial']);
});

test('--modes: anything else is invalid, reported with the other flags', () => {
  assert.throws(
    () => parseBenchFlags(flags({ modes: 'serial,fast', runs: '0' })),
    (error: unknown) => {
      assert.ok(error instanceof InvalidInputError);
      assert.match(error.message, /--modes: must be serial, parallel, guarded, learners and\/or guarded-learners, comma-separated, got serial,fast/);
      assert.match(error.message, /--runs: must be a whole number/);
      return true;
    },
  );
  assert.throws(() => parseBenchFlags(flags({ modes: '' })), /--modes/);
});

test('--keyspace takes a size (--preload is its older name); both at once, or a bad size, is invalid', () => {
  assert.equal(parseBenchFlags(flags({ keyspace: '256MiB' })).preloadBytes, 256 * 1024 ** 2);
  assert.equal(parseBenchFlags(flags({ preload: '100MB' })).preloadBytes, 100_000_000);
  assert.throws(() => parseBenchFlags(flags({ keyspace: '1MB', preload: '1MB' })), /--keyspace and --preload are the same setting/);
  assert.throws(() => parseBenchFlags(flags({ keyspace: '2GiB' })), /--keyspace: must be a size from 1B to 1GiB/);
});

test('--host-bandwidth takes a tc rate; absent, the bench runs on loopback', () => {
  assert.equal(parseBenchFlags(flags({ hostBandwidth: '100mbit' })).hostBandwidth, '100mbit');
  assert.equal(parseBenchFlags(flags({ hostBandwidth: '1.5Gbit' })).hostBandwidth, '1.5Gbit');
  assert.equal(parseBenchFlags(flags()).hostBandwidth, undefined);
  for (const bad of ['100', '100 mbit', '100Mbit/s', 'fast', '-1mbit']) {
    assert.throws(() => parseBenchFlags(flags({ hostBandwidth: bad })), new RegExp(`--host-bandwidth: must be a rate such as 100mbit .*got ${bad.replace('/', '\\/')}`));
  }
});

test("the lab limits each host's link both ways unless --asymmetric-lab; unlimited is the lab with no limit", () => {
  assert.equal(parseBenchFlags(flags({ hostBandwidth: '100mbit' })).linkLimit, 'both-directions');
  assert.equal(parseBenchFlags(flags({ hostBandwidth: '100mbit', asymmetricLab: true })).linkLimit, 'inbound-only');
  assert.equal(parseBenchFlags(flags({ hostBandwidth: 'unlimited' })).linkLimit, 'none');
  assert.throws(() => parseBenchFlags(flags({ asymmetricLab: true })), /--asymmetric-lab: only with --host-bandwidth/);
});

test('--method: scale-up (the default) or restore, which needs --keyspace', () => {
  assert.equal(parseBenchFlags(flags()).method, 'scale-up');
  assert.equal(parseBenchFlags(flags({ keyspace: '16MiB', method: 'restore' })).method, 'restore');
  assert.throws(() => parseBenchFlags(flags({ method: 'restore' })), /--method restore: give --keyspace/);
  assert.throws(() => parseBenchFlags(flags({ keyspace: '16MiB', method: 'snapshot' })), /--method: must be scale-up or restore, got snapshot/);
});

test('--kubernetes: passed on as the version the runs bring up; not with the network lab or a keyspace', () => {
  assert.equal(parseBenchFlags(flags({ kubernetes: '1.36.3' })).kubernetes, '1.36.3');
  assert.equal(parseBenchFlags(flags()).kubernetes, undefined);
  assert.throws(() => parseBenchFlags(flags({ kubernetes: '1.36.3', hostBandwidth: '100mbit' })), /--kubernetes: not with --host-bandwidth/);
  assert.throws(() => parseBenchFlags(flags({ kubernetes: '1.36.3', keyspace: '1MiB' })), /--kubernetes: not with --keyspace/);
});

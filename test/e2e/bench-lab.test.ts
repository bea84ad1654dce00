import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { after, describe, test } from 'node:test';
import type { BenchResult } from '../../src/bench/result.ts';
import { CliEnv } from '../support/cli.ts';
import { NetLab } from '../support/netlab.ts';

const LAB = 66;
const env = new CliEnv('127.87');
after(() => {
  new NetLab(LAB).down();
  env.cleanup();
});

const RATE_BITS = 40e6;
/** What tbf lets through at once before the rate applies (scripts/netlab.sh inrate: burst 4mbit). */
const BURST_BYTES = 4e6 / 8;

describe('fastplane bench --host-bandwidth on the network lab', { timeout: 800_000 }, () => {
  test('learners catch up over their own shaped links at once, and the bound knows what the leader can send', async () => {
    const keyspace = 16 * 1024 ** 2;
    const bench = await env.run(['bench', '--modes', 'parallel,learners', '--replicas', '3', '--provisioning-delay', '2s', '--keyspace', '16MiB', '--host-bandwidth', '40mbit', '--timeout', '200s', '-o', 'json'], {
      FPL_LAB: String(LAB),
    });
    assert.equal(bench.code, 0, bench.stderr);
    const result = JSON.parse(bench.stdout) as BenchResult;
    assert.equal(result.settings.hostBandwidth, '40mbit');
    const outbound = result.calibration.leaderOutbound;
    assert.ok(outbound, 'the calibration measured the leader sending its database');
    assert.equal(outbound.streams, 2, 'as many readers as a run has learners');
    assert.ok(outbound.bytesPerStream >= keyspace, `each reader got the whole database (${String(outbound.bytesPerStream)} bytes)`);
    assert.ok(result.calibration.catchUpSeconds !== null && result.calibration.catchUpSeconds > 0);

    const run = result.runs[0]!;
    const learners = run.learners!;
    assert.equal(learners.bound.inputs.learnerLimit, 8);
    assert.deepEqual(learners.bound.inputs.leaderSend, { bytesPerLearner: outbound.bytesPerStream, bytesPerSecond: outbound.bytesPerSecond });
    for (const mode of [run.parallel!, learners]) {
      for (const m of mode.machines.filter((x) => x.role === 'join')) {
        assert.ok(m.readySeconds !== null, `${m.name}: the ssh provider reports when it was ready`);
        const snap = m.snapshot;
        assert.ok(snap, `${m.name}: its log on its lab host shows the snapshot it was sent`);
        // The host's inbound link is shaped: the snapshot cannot arrive faster than the rate allows.
        const fastest = ((snap.bytes - BURST_BYTES) * 8) / RATE_BITS;
        assert.ok(snap.receiveSeconds >= fastest * 0.95, `${m.name}: ${String(snap.bytes)} bytes in ${String(snap.receiveSeconds)} s, no faster than 40mbit (${fastest.toFixed(2)} s)`);
      }
    }
    // Both learners of the learners run caught up at the same time: their add-to-promotion spans overlap.
    const spans = ['AddLearner', 'PromoteLearner'].map((action) => learners.membership.filter((c) => c.action === action));
    assert.equal(spans[0]!.length, 2);
    const [first, second] = spans[0]!;
    const firstPromoted = spans[1]!.find((c) => c.machine === first!.machine)!;
    assert.ok(second!.at < firstPromoted.at, `the second learner was added (${String(second!.at)} s) before the first was promoted (${String(firstPromoted.at)} s)`);

    const namespaces = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
    assert.doesNotMatch(namespaces, new RegExp(`fpl-${String(LAB)}-`), 'the bench removed its lab');
  });

  test('--method restore: every machine provisioned at once, the first restoring the keyspace staged on its host', async () => {
    const bench = await env.run(
      ['bench', '--modes', 'serial,learners', '--replicas', '3', '--provisioning-delay', '2s', '--keyspace', '32MiB', '--method', 'restore', '--host-bandwidth', '40mbit', '--timeout', '200s', '-o', 'json'],
      { FPL_LAB: String(LAB) },
    );
    assert.equal(bench.code, 0, bench.stderr);
    const result = JSON.parse(bench.stdout) as BenchResult;
    assert.equal(result.settings.method, 'restore');
    const restoreSeconds = result.calibration.restoreSeconds;
    assert.ok(restoreSeconds !== null && restoreSeconds > 0, 'the calibration timed a start that restored the keyspace');
    const run = result.runs[0]!;
    for (const mode of [run.serial!, run.learners!]) {
      assert.equal(mode.stages, undefined, `${mode.strategy}: the whole bring-up is timed, no stage left out`);
      assert.equal(mode.bound.inputs.initSeconds, restoreSeconds, `${mode.strategy}: the bound's init is the calibrated restore`);
      assert.equal(mode.bound.inputs.joinSeconds, result.calibration.catchUpSeconds);
      const init = mode.machines.find((m) => m.role === 'init')!;
      const joins = mode.machines.filter((m) => m.role === 'join');
      assert.equal(joins.length, 2);
      for (const m of joins) assert.ok(m.snapshot && m.snapshot.bytes >= 32 * 1024 ** 2, `${m.name} caught the keyspace up from a snapshot`);
      // A copy of the snapshot over the init host's shaped link would take at least this long; staged
      // on the host, the restore reads it from its own disk.
      const copySeconds = ((joins[0]!.snapshot!.bytes - BURST_BYTES) * 8) / RATE_BITS;
      const started = init.phaseTimes.Voter! - init.phaseTimes.Provisioned!;
      assert.ok(started < copySeconds, `${init.name} restored and served in ${started.toFixed(2)} s, less than a copy over its link (${copySeconds.toFixed(2)} s)`);
    }
    // Parallel: every machine was asked for at once; serial (KCP's order): the next only after the last joined.
    const pending = (mode: typeof run.serial) => mode!.machines.map((m) => m.phaseTimes.Pending!).sort((a, b) => a - b);
    assert.ok(Math.max(...pending(run.learners)) < 1, `learners: every machine provisioning from the start (${pending(run.learners).join(', ')})`);
    const serialInit = run.serial!.machines.find((m) => m.role === 'init')!;
    assert.ok(pending(run.serial)[1]! >= serialInit.phaseTimes.Voter!, 'serial: the second machine only once the first served');
  });
});

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import type { BenchResult } from '../../src/bench/result.ts';
import type { SweepSummary } from '../../src/bench/sweep.ts';
import { writeFlatCalibration } from '../support/bench-calibration.ts';
import { CliEnv } from '../support/cli.ts';
import { NetLab } from '../support/netlab.ts';

const LAB = 76;
const env = new CliEnv('127.41');
after(() => {
  new NetLab(LAB).down();
  env.cleanup();
});

describe('fastplane bench --sweep', { timeout: 400_000 }, () => {
  test('a bench per cell, each JSON beside a summary that quotes it, a resume that runs no finished cell again, and the report draws the map', async () => {
    // A calibration given (tests only) so that the cells' runs are what is timed here: costs far below
    // any real one, so no run can be ahead of its bound.
    const file = writeFlatCalibration(env.stateDir, 0.01, 0.01);
    const sweepArgs = ['bench', '--sweep', '--host-bandwidth', 'unlimited', '--keyspace', '0', '--provisioning-delay', '1s,2s', '--replicas', '3', '--version', '3.6.17', '--modes', 'parallel,learners', '--timeout', '120s', '-o', 'json'];
    const sweep = await env.run(sweepArgs, { FPL_LAB: String(LAB), FASTPLANE_BENCH_CALIBRATION: file });
    assert.equal(sweep.code, 0, sweep.stderr);
    const summary = JSON.parse(sweep.stdout) as SweepSummary;
    assert.equal(summary.kind, 'fastplane-bench-sweep');
    assert.deepEqual(
      summary.cells.map((c) => [c.hostBandwidth, c.keyspaceBytes, c.provisioningDelay]),
      [
        ['unlimited', 0, '1s'],
        ['unlimited', 0, '2s'],
      ],
    );
    const dir = /sweep saved to (\S+)/.exec(sweep.stderr)?.[1];
    assert.ok(dir !== undefined && existsSync(join(dir, 'summary.json')), sweep.stderr);
    for (const cell of summary.cells) {
      const result = JSON.parse(readFileSync(join(dir, cell.file), 'utf8')) as BenchResult;
      assert.equal(result.settings.provisioningDelay, cell.provisioningDelay);
      assert.equal(result.settings.linkLimit, 'none');
      assert.equal(cell.seconds.learners, result.modes.learners?.seconds);
      assert.equal(cell.learnersOverOneAtATime, result.modes.learners?.overOneAtATime?.speedup);
      assert.equal(cell.loadAverages.length, 2, 'a load average per run');
      assert.equal(cell.modelErrors, 0);
    }
    // Resumed with the same flags, a finished sweep runs no cell again; with other flags it is refused.
    const again = await env.run([...sweepArgs, '--resume', dir], { FPL_LAB: String(LAB), FASTPLANE_BENCH_CALIBRATION: file });
    assert.equal(again.code, 0, again.stderr);
    assert.equal(again.stderr.match(/finished before, kept/g)?.length, 2, again.stderr);
    assert.deepEqual((JSON.parse(again.stdout) as SweepSummary).cells, summary.cells);
    const other = await env.run([...sweepArgs.map((arg) => (arg === '1s,2s' ? '3s' : arg)), '--resume', dir]);
    assert.equal(other.code, 2, other.stderr);
    assert.match(other.stderr, /which these flags do not make/);

    const namespaces = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
    assert.doesNotMatch(namespaces, new RegExp(`fpl-${String(LAB)}-`), 'every cell removed its lab');

    // The report of any cluster in the state dir shows the last sweep's map.
    const up = await env.run(['up', '--name', 'demo', '--replicas', '1', '--provisioning-delay', '0s', '--version', '3.6.17']);
    assert.equal(up.code, 0, up.stderr);
    const out = join(env.stateDir, 'report.html');
    const report = await env.run(['report', 'demo', '--out', out]);
    assert.equal(report.code, 0, report.stderr);
    const html = readFileSync(out, 'utf8');
    assert.match(html, /<section id="sweep">/);
    assert.equal(html.match(/<g class="cell"/g)?.length, 2);
    assert.equal((await env.run(['down', 'demo'])).code, 0);
  });
});

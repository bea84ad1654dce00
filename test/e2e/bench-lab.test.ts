import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { after, describe, test } from 'node:test';
import type { BenchResult } from '../../src/bench/result.ts';
import { writeFlatCalibration } from '../support/bench-calibration.ts';
import { CliEnv } from '../support/cli.ts';
import { benchResultOf } from '../support/bench-run.ts';
import { NetLab } from '../support/netlab.ts';

const LAB = 75;
const env = new CliEnv('127.41');
after(() => {
  new NetLab(LAB).down();
  env.cleanup();
});

const RATE = '40mbit';
const RATE_BYTES_PER_SECOND = 40e6 / 8;
/** What tbf lets through at once before the rate applies (scripts/netlab.sh: burst 4mbit). */
const BURST_BYTES = 4e6 / 8;
/** The shortest time `bytes` can take through one shaped link. */
const fastestSeconds = (bytes: number): number => Math.max(0, bytes - BURST_BYTES) / RATE_BYTES_PER_SECOND;

/**
 * Moves `bytes` between fastplane's side of the lab and host 1 over TCP: `out` the host sends them
 * (bash's /dev/tcp in its namespace writes to a listener here), `in` it receives them. Resolves with
 * the seconds the bytes took, timed where they arrive or from the first byte written.
 */
async function transfer(lab: NetLab, direction: 'out' | 'in', bytes: number): Promise<number> {
  const info = lab.info();
  const host = info.hosts[0]!;
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, info.bridgeAddress, resolve));
  const { port } = server.address() as AddressInfo;
  const connected = new Promise<Socket>((resolve) => server.once('connection', resolve));
  const shell =
    direction === 'out'
      ? `head -c ${String(bytes)} /dev/zero > /dev/tcp/${info.bridgeAddress}/${String(port)}`
      : `cat < /dev/tcp/${info.bridgeAddress}/${String(port)} > /dev/null`;
  const child = spawn('ip', ['netns', 'exec', host.namespace, 'bash', '-c', shell], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => {
    resolve();
  }));
  try {
    const socket = await connected;
    const started = performance.now();
    if (direction === 'out') {
      let received = 0;
      await new Promise<void>((resolve) => {
        socket.on('data', (chunk: Buffer) => {
          received += chunk.length;
        });
        socket.on('end', resolve);
      });
      assert.equal(received, bytes);
    } else {
      const chunk = Buffer.alloc(1024 * 1024);
      for (let left = bytes; left > 0; left -= chunk.length) {
        if (!socket.write(left >= chunk.length ? chunk : chunk.subarray(0, left))) await new Promise((resolve) => socket.once('drain', resolve));
      }
      await new Promise<void>((resolve) => socket.end(resolve));
    }
    await exited;
    return (performance.now() - started) / 1000;
  } finally {
    if (child.exitCode === null && child.pid !== undefined) process.kill(child.pid);
    server.close();
  }
}

describe('fastplane bench --host-bandwidth on the network lab', { timeout: 720_000 }, () => {
  test('the lab limits what a host sends and what it receives, each near the rate, and counts both', async () => {
    const lab = new NetLab(LAB);
    lab.up(1);
    try {
      lab.linkRate(RATE);
      const bytes = 6_000_000;
      const before = lab.linkBytes().get(1)!;
      const out = await transfer(lab, 'out', bytes);
      const into = await transfer(lab, 'in', bytes);
      const moved = lab.linkBytes().get(1)!;
      for (const [what, took] of [
        ['out of the host', out],
        ['into the host', into],
      ] as const) {
        const rate = bytes / took;
        assert.ok(took >= fastestSeconds(bytes) * 0.95, `${what}: ${String(bytes)} bytes in ${took.toFixed(2)} s, no faster than ${RATE}`);
        assert.ok(rate >= RATE_BYTES_PER_SECOND * 0.6, `${what}: ${(rate / 1e6).toFixed(2)} MB/s, near ${RATE} (not held back by something else)`);
      }
      assert.ok(moved.sent - before.sent >= bytes && moved.received - before.received >= bytes, `the link counters saw both transfers: ${JSON.stringify({ before, moved })}`);
    } finally {
      lab.down();
    }
  });

  test('--method restore: the snapshot crosses the first host\'s link inside the timed window, and the leader sends through its own limited uplink', async () => {
    const bench = await env.run(
      ['bench', '--modes', 'learners', '--replicas', '3', '--provisioning-delay', '2s', '--keyspace', '8MiB', '--method', 'restore', '--host-bandwidth', RATE, '--timeout', '200s', '-o', 'json'],
      { FPL_LAB: String(LAB) },
    );
    const result = benchResultOf(bench);
    assert.equal(result.settings.linkLimit, 'both-directions');
    const c = result.calibration;
    for (const [term, samples, cold, fastest] of [
      ['init', c.initSamplesSeconds, c.coldSeconds.init, c.initSeconds],
      ['join', c.joinSamplesSeconds, c.coldSeconds.join, c.joinSeconds],
      ['restore', c.restoreSamplesSeconds, c.coldSeconds.restore, c.restoreSeconds],
      ['catch-up', c.catchUpSamplesSeconds, c.coldSeconds.catchUp, c.catchUpSeconds],
    ] as const) {
      assert.ok(samples.length >= 5, `${term}: at least 5 warm samples (${String(samples.length)})`);
      assert.equal(fastest, Math.min(cold ?? Infinity, ...samples), `${term}: the bound takes the fastest sample, cold or warm`);
    }
    // The leader's outbound rate is read through its own shaped link: no more than the link's rate.
    const outbound = c.leaderOutbound!;
    assert.equal(outbound.streams, 2);
    assert.ok(outbound.bytesPerSecond <= RATE_BYTES_PER_SECOND * 1.1, `the leader sent ${String(outbound.bytesPerSecond)} B/s in all, within its ${RATE} uplink`);

    const run = result.runs[0]!;
    for (const mode of [run.learners!]) {
      assert.equal(mode.bound.inputs.initSeconds, c.restoreSeconds);
      const init = mode.machines.find((m) => m.role === 'init')!;
      const joins = mode.machines.filter((m) => m.role === 'join');
      assert.equal(joins.length, 2);
      const snapshotBytes = Math.min(...joins.map((m) => m.snapshot!.bytes));
      assert.ok(snapshotBytes >= 8 * 1024 ** 2, 'each learner caught the keyspace up from a snapshot');
      // The first member's snapshot was copied to its host within the run, over its link: counted in
      // the bytes its host received and in the time to its serving.
      const initHost = Object.values(mode.linkBytes!).find((l) => l.machines.includes(init.name));
      assert.ok(initHost, `${init.name}'s host is counted: ${JSON.stringify(mode.linkBytes)}`);
      assert.ok(initHost.received >= snapshotBytes, `${init.name}'s host received the snapshot within the run (${String(initHost.received)} bytes, snapshot ${String(snapshotBytes)})`);
      // Its uplink fed both learners: each snapshot left through it.
      assert.ok(initHost.sent >= 2 * snapshotBytes, `${init.name}'s host sent both learners the snapshot (${String(initHost.sent)} bytes)`);
      const served = init.phaseTimes.Voter! - (init.readySeconds ?? 0);
      assert.ok(served >= fastestSeconds(snapshotBytes), `${init.name} served ${served.toFixed(2)} s after it was ready, no sooner than the copy over its link`);
      assert.equal(mode.loadAverage.length, 3, 'the load average is recorded with each run');
    }
    // Each learner's snapshot came through shaped links: no faster than the rate.
    for (const m of run.learners!.machines.filter((x) => x.role === 'join')) {
      const snap = m.snapshot!;
      assert.ok(snap.receiveSeconds >= fastestSeconds(snap.bytes) * 0.95, `${m.name}: ${String(snap.bytes)} bytes in ${String(snap.receiveSeconds)} s, no faster than ${RATE}`);
    }

    const namespaces = execFileSync('ip', ['netns', 'list'], { encoding: 'utf8' });
    assert.doesNotMatch(namespaces, new RegExp(`fpl-${String(LAB)}-`), 'the bench removed its lab');
  });

  test('a run ahead of its bound at a milestone fails the bench loudly, its result still saved', async () => {
    // A calibration that claims an init takes 20 s: the run's first member serves long before that.
    const file = writeFlatCalibration(env.stateDir, 20, 0.5);
    const bench = await env.run(['bench', '--modes', 'parallel', '--replicas', '3', '--provisioning-delay', '1s', '--version', '3.6.17', '--timeout', '120s', '-o', 'json'], { FASTPLANE_BENCH_CALIBRATION: file });
    assert.equal(bench.code, 1, bench.stderr);
    assert.match(bench.stderr, /MODEL ERROR: 1 run\(s\) got ahead of their bound.*init serving at [\d.]+ s, bound 2\d\.\d+ s/);
    const result = JSON.parse(bench.stdout) as BenchResult;
    const run = result.runs[0]!.parallel!;
    assert.equal(run.modelError, true);
    assert.equal(run.milestonesAhead[0]?.milestone, 'init serving');
  });
});

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { after, describe, test } from 'node:test';
import { CliEnv, pidsUnder } from '../support/cli.ts';
import { benchResultOf } from '../support/bench-run.ts';

const env = new CliEnv('127.85');
after(() => {
  env.cleanup();
});

/**
 * Where the screenshot goes: the test's own state dir, so a test run changes no tracked file.
 * `npm run docs:screenshot` points it at docs/timeline.png to refresh the README's picture.
 */
const SCREENSHOT = resolve(process.env.FASTPLANE_SCREENSHOT_OUT ?? join(env.stateDir, 'timeline.png'));

interface ChromiumRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Headless Chromium (Debian's `chromium`, installed by scripts/install-test-tools.sh) on a local file.
 * Its profile lives under the test's state dir, so CliEnv.cleanup would stop anything it left; we stop
 * leftovers (crash handler, zygotes) ourselves right away, by PID.
 */
async function chromium(extra: string[], file: string): Promise<ChromiumRun> {
  const profile = mkdtempSync(join(env.stateDir, 'chromium-'));
  const args = [
    '--headless',
    '--no-sandbox',
    '--disable-gpu',
    '--disable-background-networking',
    '--disable-component-update',
    '--disable-sync',
    '--no-first-run',
    `--user-data-dir=${profile}`,
    ...extra,
    `file://${file}`,
  ];
  const run = await new Promise<ChromiumRun>((resolve, reject) => {
    const child = spawn('chromium', args, { detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      // Its own process group (detached): the browser and every helper it started.
      if (child.pid !== undefined) process.kill(-child.pid, 'SIGKILL');
    }, 60_000);
    child.on('error', (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
  for (const pid of pidsUnder(profile)) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // Already gone.
    }
  }
  return run;
}

/** The markup of each row of one timeline SVG, by machine name. */
function rowsOf(dom: string, svgId: string): Map<string, string> {
  const start = dom.indexOf(`id="${svgId}"`);
  assert.ok(start >= 0, `timeline ${svgId} is in the page`);
  const svg = dom.slice(start, dom.indexOf('</svg>', start));
  const rows = new Map<string, string>();
  const chunks = svg.split('data-machine="').slice(1);
  for (const chunk of chunks) rows.set(chunk.slice(0, chunk.indexOf('"')), chunk);
  return rows;
}

const count = (text: string, needle: string): number => text.split(needle).length - 1;

describe('fastplane report and bench on real etcd', { timeout: 300_000 }, () => {
  const html = join(env.stateDir, 'tl.html');

  test('up 5, scale to 3, bench 3 replicas in a private dir, report: rows, bars and markers render in Chromium', async () => {
    const up = await env.run(['up', '--name', 'tl', '--replicas', '5', '--provisioning-delay', '2s-6s', '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const scale = await env.run(['scale', 'tl', '--replicas', '3', '--timeout', '90s', '-o', 'json']);
    assert.equal(scale.code, 0, scale.stderr);

    const bench = await env.run(['bench', '--replicas', '3', '--provisioning-delay', '1s', '--modes', 'serial,parallel,guarded,learners', '--timeout', '90s', '-o', 'json']);
    const result = benchResultOf(bench);
    for (const key of ['serialSeconds', 'parallelSeconds', 'boundSeconds', 'speedup', 'efficiency'] as const) {
      assert.ok((result[key] ?? 0) > 0, `${key} is measured (${String(result[key])})`);
      assert.equal(result.medians[key], result[key], `${key} is the median of one run`);
    }
    assert.equal(result.runs.length, 1);
    const run = result.runs[0]!;
    assert.deepEqual([...run.order].sort(), ['guarded', 'learners', 'parallel', 'serial']);
    const parallel = run.parallel!;
    assert.equal(parallel.machines.length, 3);
    assert.deepEqual(Object.keys(result.modes), ['serial', 'parallel', 'guarded', 'learners'], 'the modes asked for, side by side');
    assert.ok((result.modes.guarded?.seconds ?? 0) > 0, 'the guarded mode ran');
    // Each bound takes the learner limit the members ran: one for parallel, etcd 3.6's 8 for learners.
    assert.equal(parallel.bound.inputs.learnerLimit, 1);
    assert.equal(run.learners?.bound.inputs.learnerLimit, 8);
    // The bound comes from a calibration on another cluster, never from the run; a run beating it is
    // reported as a model error with its efficiency above 1, not clipped.
    assert.ok(result.calibration.initSamplesSeconds.length >= 5 && result.calibration.joinSamplesSeconds.length >= 5, 'at least 5 calibration samples each');
    // A lower bound assumes each cost at the fastest the host has shown.
    const c = result.calibration;
    assert.equal(c.initSeconds, Math.min(c.coldSeconds.init, ...c.initSamplesSeconds));
    assert.equal(c.joinSeconds, Math.min(c.coldSeconds.join, ...c.joinSamplesSeconds));
    assert.equal(parallel.efficiency, Math.round((parallel.boundSeconds / parallel.seconds) * 1000) / 1000);
    const latency = result.modes.parallel?.promotionLatency;
    assert.ok(latency?.medianSeconds != null && latency.maxSeconds != null, 'promotion latency is measured from outside');
    assert.equal(result.promotionLatencySeconds.parallel, latency.medianSeconds);
    // The user's cluster is untouched, bench clusters are gone with their processes and temporary dir.
    assert.deepEqual(env.controlPlanes(), ['tl']);
    assert.deepEqual(pidsUnder(join(env.stateDir, 'bench')), []);
    assert.ok(existsSync(join(env.stateDir, 'bench', 'latest.json')), 'bench saved its result for the report');
    const status = await env.run(['status', 'tl', '-o', 'json']);
    assert.equal(status.code, 0, status.stderr);
    assert.equal((JSON.parse(status.stdout) as { status: { voters: number } }).status.voters, 3);

    const report = await env.run(['report', 'tl', '--out', html]);
    assert.equal(report.code, 0, report.stderr);
    assert.equal(report.stdout.trim(), html);

    // Self-contained: no script, no stylesheet link, nothing loaded over the network.
    const source = readFileSync(html, 'utf8');
    assert.doesNotMatch(source, /<script/i);
    assert.doesNotMatch(source, /<link/i);
    assert.doesNotMatch(source, /(src|href)\s*=\s*["']?(https?:)?\/\//i);

    const dom = await chromium(['--dump-dom'], html);
    assert.equal(dom.code, 0, dom.stderr);
    const rows = rowsOf(dom.stdout, 'cluster-timeline');
    assert.deepEqual([...rows.keys()].sort(), ['tl-1', 'tl-2', 'tl-3', 'tl-4', 'tl-5'], 'one row per machine, the two removed ones included');
    for (const [name, row] of rows) {
      assert.ok(count(row, 'class="bar ') >= 2, `${name} has phase bars`);
      assert.match(row, /data-phase="voter"/, `${name} was a voter`);
    }
    const all = [...rows.values()].join('');
    for (const phase of ['provisioning', 'gate', 'learner', 'voter', 'deleting']) assert.match(all, new RegExp(`data-phase="${phase}"`), `a ${phase} bar`);
    const timeline = dom.stdout.slice(dom.stdout.indexOf('id="cluster-timeline"'));
    assert.ok(count(timeline, 'data-action="InitCluster"') >= 2, 'InitCluster on its row and on the membership row');
    assert.ok(count(all, 'class="marker" data-action="AddLearner"') >= 4, 'an AddLearner marker per joined machine');
    assert.ok(count(all, 'class="marker" data-action="PromoteLearner"') >= 4, 'a PromoteLearner marker per joined machine');
    assert.ok(count(all, 'class="marker" data-action="RemoveMember"') >= 2, 'a RemoveMember marker per removed machine');
    for (const legend of ['provisioning', 'gate', 'learner', 'voter', 'deleting', 'AddLearner', 'PromoteLearner']) assert.match(dom.stdout, new RegExp(`data-legend="${legend}"`));
    assert.match(dom.stdout, /<section id="comparison">/, 'the bench comparison is in the report');
    for (const mode of ['serial', 'parallel', 'guarded', 'learners']) assert.match(dom.stdout, new RegExp(`<tr data-mode="${mode}"><td>${mode}</td><td>\\d`), `the ${mode} figures`);
    assert.equal(rowsOf(dom.stdout, 'bench-serial').size, 3);
    assert.equal(rowsOf(dom.stdout, 'bench-parallel').size, 3);
    // Parallel learners: the two joins of the learners run (started, then learner, until promoted) overlap in time.
    // Rows come in name order; the init member's row is the one carrying the InitCluster marker.
    const catchUps = [...rowsOf(dom.stdout, 'bench-learners').values()].flatMap((row) => {
      const bars = [...row.matchAll(/data-phase="(starting|learner)" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"/g)].map((m) => ({ from: Number(m[2]), to: Number(m[2]) + Number(m[3]) }));
      const init = row.includes('data-action="InitCluster"');
      return bars.length === 0 || !/data-phase="voter"/.test(row) ? [] : [{ init, from: Math.min(...bars.map((b) => b.from)), to: Math.max(...bars.map((b) => b.to)) }];
    });
    assert.equal(catchUps.length, 3, 'the init member starting and both joins are drawn');
    assert.equal(catchUps.filter((c) => c.init).length, 1, `one row holds the init member: ${JSON.stringify(catchUps)}`);
    const [first, second] = catchUps.filter((c) => !c.init);
    assert.ok(first && second && first.from < second.to && second.from < first.to, `the joins overlap: ${JSON.stringify(catchUps)}`);

    const shot = await chromium([`--screenshot=${SCREENSHOT}`, '--window-size=1200,700', '--hide-scrollbars'], html);
    assert.equal(shot.code, 0, shot.stderr);
    const png = readFileSync(SCREENSHOT);
    assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG');
    assert.ok(statSync(SCREENSHOT).size > 10_000, 'the screenshot shows more than a blank page');
  });

  test('bad report and bench flags exit 2, name the flag and create nothing', async () => {
    const cases: [string[], RegExp][] = [
      [['report', 'nope'], /no control plane named nope/],
      [['report', 'tl', '--out', '/nonexistent-folder/x.html'], /--out/],
      [['report', 'tl', '--out', env.stateDir], /--out/],
      [['bench', '--replicas', '4'], /--replicas/],
      [['bench', '--replicas', '1'], /--replicas/],
      [['bench', '--runs', '0'], /--runs/],
      [['bench', '--preload', '12XB'], /--preload/],
      [['bench', '--provisioning-delay', '9s-3s'], /--provisioning-delay/],
      [['bench', '-o', 'yaml'], /-o/],
      [['bench', '--timeout', 'soon'], /--timeout/],
      [['bench', '--version', '9.9.9'], /9\.9\.9/],
      [['bench', '--keyspace', '1MB', '--preload', '1MB'], /--keyspace and --preload/],
      [['bench', '--modes', 'parallel,learners', '--version', '3.4.23'], /--modes: learners and guarded-learners need etcd 3\.6 or later/],
    ];
    const before = env.controlPlanes();
    for (const [args, message] of cases) {
      const run = await env.run(args);
      assert.equal(run.code, 2, `${args.join(' ')} exits 2 (stderr: ${run.stderr})`);
      assert.match(run.stderr, message, args.join(' '));
    }
    assert.deepEqual(env.controlPlanes(), before);
    assert.deepEqual(pidsUnder(join(env.stateDir, 'bench')), []);
  });
});

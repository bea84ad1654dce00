import { spawn } from 'node:child_process';
import { createWriteStream, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { LANES, laneOf, testFiles, type Lane } from './test-lanes.ts';
import { ensureBuiltCli } from '../test/support/built-cli.ts';
import { cpuMeter, MachineLoad, type CpuMeter } from './test-cpu.ts';
import { coresUsed, mayStart, type Durations } from './test-schedule.ts';

/**
 * Runs test lanes (scripts/test-lanes.ts) or single files: one `node --test` process per file, the
 * longest first (by test/durations.json; a file it does not know is taken as long) so no long file
 * starts last. Another file starts while the running files' measured cores and its own fit the
 * machine's (scripts/test-schedule.ts: mayStart), never a CPU-heavy file beside a timing-sensitive
 * one. Each file's output goes to a log; a failure prints the end of it. Ends with the slowest files
 * and a non-zero exit when any file failed. `--record` writes the wall and CPU seconds measured into
 * the durations.
 *
 *   node --import tsx scripts/run-tests.ts [--record] all | <lane>... | <file>...
 */

const ROOT = join(import.meta.dirname, '..');
const DURATIONS_FILE = join(ROOT, 'test', 'durations.json');
const SLOWEST_SHOWN = 15;
const PROGRESS_EVERY_MS = 30_000;
const FAILURE_LINES_SHOWN = 80;
/** How often a waiting file is looked at again while no file ends. */
const RECHECK_MS = 5_000;

const COUNTED = ['tests', 'pass', 'fail', 'cancelled', 'skipped', 'todo'] as const;
type Counts = Record<(typeof COUNTED)[number], number>;

interface FileRun {
  file: string;
  seconds: number;
  /** CPU of the file's process tree; undefined when it could not be measured. */
  cpuSeconds: number | undefined;
  ok: boolean;
  log: string;
  counts: Counts;
}

interface Group {
  name: string;
  files: string[];
}

function abort(message: string): never {
  process.stderr.write(`${message}\n`);
  process.exit(1);
}

function readDurations(): Durations {
  return existsSync(DURATIONS_FILE) ? (JSON.parse(readFileSync(DURATIONS_FILE, 'utf8')) as Durations) : {};
}

/**
 * The measured times of the files that passed replace their entries; files that are gone lose theirs.
 * The file is read again here, so runs of other files that ended meanwhile keep what they wrote.
 */
function writeDurations(runs: FileRun[], present: Set<string>): void {
  const known = readDurations();
  const next: Durations = Object.fromEntries(Object.entries(known).filter(([file]) => present.has(file)));
  const tenths = (s: number): number => Math.round(s * 10) / 10;
  for (const run of runs.filter((r) => r.ok)) {
    next[run.file] = { seconds: tenths(run.seconds), ...(run.cpuSeconds === undefined ? {} : { cpuSeconds: tenths(run.cpuSeconds) }), source: 'measured' };
  }
  // One line per file, so the file stays short and a refresh reads as a diff of times.
  const lines = Object.entries(next)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([file, duration]) => `  ${JSON.stringify(file)}: ${JSON.stringify(duration)}`);
  writeFileSync(DURATIONS_FILE, `{\n${lines.join(',\n')}\n}\n`);
}

/** The top-level `# tests N` lines of node:test's TAP summary. */
function countsIn(output: string): Counts {
  const counts: Counts = { tests: 0, pass: 0, fail: 0, cancelled: 0, skipped: 0, todo: 0 };
  for (const key of COUNTED) {
    const found = new RegExp(`^# ${key} (\\d+)$`, 'm').exec(output);
    counts[key] = Number(found?.[1] ?? 0);
  }
  return counts;
}

function runFile(file: string, logDir: string, meter: CpuMeter): Promise<FileRun> {
  const log = join(logDir, `${file.replaceAll('/', '_')}.log`);
  const out = createWriteStream(log);
  const started = performance.now();
  const test = [process.execPath, '--import', 'tsx', '--test', '--test-reporter=tap', file];
  const [command, ...args] = meter.command(file, test);
  const child = spawn(command!, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe', 'pipe'] });
  child.stdout!.pipe(out, { end: false });
  child.stderr!.pipe(out, { end: false });
  let cpuReport = '';
  child.stdio[3]?.on('data', (d: Buffer) => (cpuReport += d.toString()));
  return new Promise((resolve) => {
    const finish = (ok: boolean): void => {
      out.end(() => {
        const seconds = (performance.now() - started) / 1000;
        const cpuSeconds = meter.cpuSeconds(file, cpuReport);
        resolve({ file, seconds, cpuSeconds, ok, log, counts: countsIn(readFileSync(log, 'utf8')) });
      });
    };
    child.once('error', (error) => {
      out.write(`\ncould not start the test process: ${error.message}\n`);
      finish(false);
    });
    child.once('close', (code) => {
      finish(code === 0);
    });
  });
}

const seconds = (s: number): string => `${s.toFixed(1).padStart(7)} s`;
const cpu = (s: number | undefined): string => (s === undefined ? '      ? s CPU' : `${seconds(s)} CPU`);

function printFinished(run: FileRun): void {
  const c = run.counts;
  process.stdout.write(`  ${run.ok ? 'ok  ' : 'FAIL'} ${seconds(run.seconds)} ${cpu(run.cpuSeconds)}  ${run.file}  (${String(c.pass)}/${String(c.tests)} passed)\n`);
  if (run.ok) return;
  const lines = readFileSync(run.log, 'utf8').trimEnd().split('\n');
  process.stdout.write(`${lines.slice(-FAILURE_LINES_SHOWN).map((line) => `    | ${line}`).join('\n')}\n    (whole output: ${run.log})\n`);
}

async function runGroup(group: Group, durations: Durations, logDir: string, cores: number, meter: CpuMeter, load: MachineLoad): Promise<FileRun[]> {
  const expected = (file: string): number => durations[file]?.seconds ?? Number.POSITIVE_INFINITY;
  const coresOf = (file: string): number => coresUsed(durations[file]);
  const queue = [...group.files].sort((a, b) => expected(b) - expected(a) || a.localeCompare(b));
  const running = new Map<string, { started: number; done: Promise<FileRun> }>();
  const results: FileRun[] = [];
  const groupStarted = performance.now();
  process.stdout.write(`\n${group.name}: ${String(queue.length)} files, as many at a time as their measured CPU fits ${String(cores)} cores\n`);
  const progress = setInterval(() => {
    const now = performance.now();
    const busy = [...running].map(([file, r]) => `${file} (${String(Math.round((now - r.started) / 1000))} s, ${coresOf(file).toFixed(2)} cores)`).join(', ');
    process.stdout.write(`  ... ${group.name}: ${String(results.length)}/${String(group.files.length)} done after ${String(Math.round((now - groupStarted) / 1000))} s, ${load.busyCores().toFixed(1)} cores busy; running ${busy}\n`);
  }, PROGRESS_EVERY_MS);
  try {
    while (queue.length > 0 || running.size > 0) {
      for (let i = 0; i < queue.length; ) {
        const file = queue[i]!;
        if (!mayStart(file, [...running.keys()], coresOf, cores, load.busyCores())) {
          i++;
          continue;
        }
        queue.splice(i, 1);
        running.set(file, { started: performance.now(), done: runFile(file, logDir, meter) });
      }
      // A file ends, or the machine's load is looked at again for the files still waiting.
      const waits: Promise<FileRun | undefined>[] = [...running.values()].map((r) => r.done);
      if (queue.length > 0) waits.push(sleep(RECHECK_MS).then(() => undefined));
      const finished = await Promise.race(waits);
      if (finished === undefined) continue;
      running.delete(finished.file);
      results.push(finished);
      printFinished(finished);
    }
  } finally {
    clearInterval(progress);
  }
  process.stdout.write(`${group.name}: ${results.every((r) => r.ok) ? 'passed' : 'FAILED'} in ${String(Math.round((performance.now() - groupStarted) / 1000))} s\n`);
  return results;
}

function printSummary(runs: FileRun[], logDir: string): void {
  const slowest = [...runs].sort((a, b) => b.seconds - a.seconds).slice(0, SLOWEST_SHOWN);
  process.stdout.write(`\nslowest ${String(slowest.length)} files (wall, CPU of the file's processes):\n${slowest.map((r) => `  ${seconds(r.seconds)} ${cpu(r.cpuSeconds)}  ${r.file}  (${laneOf(r.file) ?? ''})`).join('\n')}\n`);
  const total = Object.fromEntries(COUNTED.map((key) => [key, runs.reduce((sum, r) => sum + r.counts[key], 0)])) as Counts;
  process.stdout.write(`\n${String(runs.length)} files, ${COUNTED.map((key) => `${key} ${String(total[key])}`).join(', ')}; logs in ${logDir}\n`);
  const failed = runs.filter((r) => !r.ok);
  if (failed.length > 0) process.stdout.write(`FAILED:\n${failed.map((r) => `  ${r.file}  (${r.log})`).join('\n')}\n`);
}

/**
 * The lanes or files asked for. The fast lane runs first on its own: its CPU-heavy property tests are
 * done before any timing-sensitive file starts, and a broken edit shows within minutes. The other
 * lanes share one queue, so their longest files start first whatever their lane. A test file in no
 * lane stops the run.
 */
function groupsFor(targets: string[], all: string[]): Group[] {
  const unassigned = all.filter((file) => laneOf(file) === undefined);
  if (unassigned.length > 0) abort(`test files in no lane (add their folder or name in scripts/test-lanes.ts):\n  ${unassigned.join('\n  ')}`);
  const lanes = targets.includes('all') ? [...LANES] : LANES.filter((lane) => targets.includes(lane));
  const files = targets.filter((target) => target !== 'all' && !LANES.some((lane) => lane === target));
  const missing = files.filter((file) => !existsSync(join(ROOT, file)));
  if (missing.length > 0) abort(`no such test file or lane: ${missing.join(', ')} (lanes: all, ${LANES.join(', ')})`);
  const inLanes = (names: Lane[]): Group => ({ name: names.join(' + '), files: all.filter((file) => names.some((lane) => laneOf(file) === lane)) });
  const slow = lanes.filter((lane) => lane !== 'fast');
  return [...(lanes.includes('fast') ? [inLanes(['fast'])] : []), ...(slow.length > 0 ? [inLanes(slow)] : []), ...(files.length > 0 ? [{ name: 'files', files }] : [])];
}

async function main(): Promise<void> {
  const args = process.argv.slice(2);
  const record = args.includes('--record');
  const targets = args.filter((arg) => arg !== '--record');
  if (targets.length === 0) abort('usage: run-tests.ts [--record] all | <lane>... | <file>...');
  const all = testFiles(ROOT);
  const groups = groupsFor(targets, all);
  const durations = readDurations();
  const logDir = mkdtempSync(join(tmpdir(), 'fastplane-tests-'));
  const cores = Math.max(1, availableParallelism());
  // Before any file starts: the tests run the compiled CLI, and files started at once would wait on one build.
  await ensureBuiltCli();
  const meter = cpuMeter();
  const load = new MachineLoad();
  process.stdout.write(`CPU per file: ${meter.description}\n`);
  const runs: FileRun[] = [];
  try {
    for (const group of groups) runs.push(...(await runGroup(group, durations, logDir, cores, meter, load)));
  } finally {
    meter.close();
    load.stop();
  }
  printSummary(runs, logDir);
  if (record) {
    writeDurations(runs, new Set(all));
    process.stdout.write(`durations of ${String(runs.filter((r) => r.ok).length)} files written to test/durations.json\n`);
  }
  process.exitCode = runs.every((r) => r.ok) ? 0 : 1;
}

await main();

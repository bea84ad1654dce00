/**
 * `npm run bench:cli`: cold start of the compiled CLI (bin/fastplane.js -> dist/), as a user runs it:
 * wall time from spawn to exit and peak RSS of `fastplane status` (no clusters: opens the state store,
 * prints "no control planes"), `--help` and `--version`, over RUNS starts each after a warm-up; and for
 * scale, node starting alone and `status` through tsx (how bin/ started the CLI before). JSON on
 * stdout. Targets (issue 14): median under 300 ms, peak RSS under 80 MB, on an idle host.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hostInfo } from '../src/bench/host-info.ts';
import { median } from '../src/bench/stats.ts';

const ROOT = join(import.meta.dirname, '..');
const RUNS = Number(process.env.FASTPLANE_BENCH_RUNS ?? 15);
const WARMUP = 2;
/**
 * Preloaded into each measured start (node --import): writes the process's own peak RSS (KiB) to
 * $FASTPLANE_RSS_FILE as it exits, so the figure is the whole process's, not a sample of it.
 */
const REPORT_MAX_RSS = `data:text/javascript,${encodeURIComponent(
  "import { writeFileSync } from 'node:fs'; process.on('exit', () => writeFileSync(process.env.FASTPLANE_RSS_FILE, String(process.resourceUsage().maxRSS)));",
)}`;

interface Start {
  ms: number;
  maxRssKiB: number;
}

/** What is started: the compiled CLI, and for scale, node doing nothing and the CLI through tsx (the old bin). */
const COMPILED = [join(ROOT, 'bin/fastplane.js')];
const NODE_ALONE = ['-e', '0'];
const THROUGH_TSX = ['--import', 'tsx', join(ROOT, 'src/cli/main.ts')];

async function start(command: string[], args: string[], stateDir: string, rssFile: string): Promise<Start> {
  const began = performance.now();
  const code = await new Promise<number | null>((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', REPORT_MAX_RSS, ...command, ...args], {
      cwd: ROOT,
      env: { ...process.env, FASTPLANE_HOME: stateDir, FASTPLANE_RSS_FILE: rssFile },
      stdio: 'ignore',
    });
    child.on('error', reject);
    child.on('exit', resolve);
  });
  const ms = performance.now() - began;
  if (code !== 0) throw new Error(`${[...command, ...args].join(' ')} exited ${String(code)}`);
  return { ms, maxRssKiB: Number(readFileSync(rssFile, 'utf8')) };
}

async function measure(command: string[], args: string[], stateDir: string): Promise<Record<string, number>> {
  const rssFile = join(stateDir, 'rss');
  for (let i = 0; i < WARMUP; i++) await start(command, args, stateDir, rssFile);
  const starts: Start[] = [];
  for (let i = 0; i < RUNS; i++) starts.push(await start(command, args, stateDir, rssFile));
  const ms = starts.map((s) => s.ms);
  const rssMB = starts.map((s) => s.maxRssKiB / 1024);
  const round = (n: number, digits: number): number => Math.round(n * 10 ** digits) / 10 ** digits;
  return {
    runs: RUNS,
    medianMs: round(median(ms) ?? NaN, 1),
    minMs: round(Math.min(...ms), 1),
    maxMs: round(Math.max(...ms), 1),
    medianPeakRssMB: round(median(rssMB) ?? NaN, 1),
    maxPeakRssMB: round(Math.max(...rssMB), 1),
  };
}

const stateDir = mkdtempSync(join(tmpdir(), 'fastplane-cli-bench-'));
try {
  const host = hostInfo();
  const status = await measure(COMPILED, ['status'], stateDir);
  const help = await measure(COMPILED, ['--help'], stateDir);
  const version = await measure(COMPILED, ['--version'], stateDir);
  // For scale only, not targets: what node alone costs here, and `status` the way bin/ ran it before.
  const nodeAlone = await measure(NODE_ALONE, [], stateDir);
  const statusThroughTsx = await measure(THROUGH_TSX, ['status'], stateDir);
  const doc = { kind: 'fastplane-cli-bench', at: new Date().toISOString(), host, loadAverageAtEnd: hostInfo().loadAverage, status, help, version, nodeAlone, statusThroughTsx };
  process.stdout.write(`${JSON.stringify(doc, null, 2)}\n`);
} finally {
  rmSync(stateDir, { recursive: true, force: true });
}

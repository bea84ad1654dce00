import { mayRunBeside } from './test-lanes.ts';

/**
 * When the runner may start one more test file: by the CPU the files measurably use, not by the
 * number of cores. Most e2e files wait on processes (elections, timeouts, provisioning delays) and
 * use a fraction of a core, so more of them than there are cores can run at once.
 */

/** A file's run on an idle 2-core machine: measured by a `--record` run, or estimated by hand. */
export interface Duration {
  seconds: number;
  /** User and system CPU of every process the file started (scripts/test-cpu.ts). */
  cpuSeconds?: number;
  source: 'measured' | 'estimate';
}
export type Durations = Record<string, Duration>;

/**
 * The cores a file keeps busy on average: its CPU seconds over its wall seconds. A file never
 * measured counts as one full core, like a file that computes all the time, and so does one measured
 * above a core (a short file's start compiles on a second thread): two such files still run at once
 * on two cores, as when files were scheduled one per core.
 */
export function coresUsed(duration: Duration | undefined): number {
  if (duration?.cpuSeconds === undefined || duration.seconds <= 0) return 1;
  return Math.min(1, duration.cpuSeconds / duration.seconds);
}

/** At most one file more than there are cores: each file's CPU is an average, and its peaks need room. */
export const maxFilesAtOnce = (cores: number): number => cores + 1;

/**
 * Whether `candidate` may start beside `running`: a file always starts when nothing runs; otherwise
 * the files at once stay within maxFilesAtOnce, a CPU-heavy file never runs beside a timing-sensitive
 * one (mayRunBeside), and the running files' cores with the candidate's stay within the machine's.
 */
export function mayStart(candidate: string, running: readonly string[], coresOf: (file: string) => number, cores: number): boolean {
  if (running.length === 0) return true;
  if (running.length >= maxFilesAtOnce(cores) || !mayRunBeside(candidate, running)) return false;
  const load = running.reduce((sum, file) => sum + coresOf(file), coresOf(candidate));
  return load <= cores;
}

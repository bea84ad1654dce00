import { laneOf, mayRunBeside } from './test-lanes.ts';

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
 * The cores a file not measured for CPU is taken to use. Files run with real etcd and Kubernetes
 * wait on processes most of the time: measured with every process counted, they kept 0.2 to 0.7 of
 * a core busy, the Kubernetes ones up to 1. Three such files start at once on two cores, and the
 * machine's measured load (mayStart's `busyCores`) holds back a fourth when they use more.
 */
export const UNMEASURED_CORES = 0.65;

/**
 * The cores a file keeps busy on average: its CPU seconds over its wall seconds, never more than one
 * (a short file's start compiles on a second thread: two such files still run at once on two cores).
 */
export function coresUsed(duration: Duration | undefined): number {
  if (duration?.cpuSeconds === undefined || duration.seconds <= 0) return UNMEASURED_CORES;
  return Math.min(1, duration.cpuSeconds / duration.seconds);
}

/** At most one file more than there are cores: each file's CPU is an average, and its peaks need room. */
export const maxFilesAtOnce = (cores: number): number => cores + 1;

/** Files of the fast lane compute and wait on nothing: a busy machine only stretches them. */
const waitsOnProcesses = (file: string): boolean => laneOf(file) !== 'fast';

/** The share of the machine's cores busy (all processes, over the last seconds) above which no file starts. */
export const BUSY_LIMIT = 0.8;

/**
 * Whether `candidate` may start beside `running`: a file always starts when nothing runs; otherwise
 * the files at once stay within maxFilesAtOnce, a CPU-heavy file never runs beside a timing-sensitive
 * one (mayRunBeside), the running files' cores with the candidate's stay within the machine's, and,
 * when a file that waits on real processes is among them, the machine is not busier than BUSY_LIMIT
 * right now (`busyCores`, measured: the averages above miss a burst, such as an API server starting).
 */
export function mayStart(candidate: string, running: readonly string[], coresOf: (file: string) => number, cores: number, busyCores = 0): boolean {
  if (running.length === 0) return true;
  if (running.length >= maxFilesAtOnce(cores) || !mayRunBeside(candidate, running)) return false;
  if (busyCores > cores * BUSY_LIMIT && [candidate, ...running].some(waitsOnProcesses)) return false;
  const load = running.reduce((sum, file) => sum + coresOf(file), coresOf(candidate));
  return load <= cores;
}

import { readdirSync } from 'node:fs';

/**
 * The test lanes, by what their files need: `fast` runs on the model and in-process (no etcd, no
 * network lab), for every edit; `etcd` starts real etcd processes; `e2e` runs the CLI against real
 * etcd; `chaos` kills, freezes and partitions members under a writer. A file belongs to the lane of
 * its folder unless it is listed by name, so a new file in a known folder always runs.
 */
export const LANES = ['fast', 'etcd', 'e2e', 'chaos'] as const;
export type Lane = (typeof LANES)[number];

const LANE_OF_FOLDER: Record<string, Lane> = {
  'test/unit': 'fast',
  'test/property': 'fast',
  'test/sim': 'fast',
  'test/contract': 'etcd',
  'test/integration': 'etcd',
  'test/e2e': 'e2e',
  'test/chaos': 'chaos',
};

/** Files whose folder's lane does not fit them: the EtcdAdmin contract on the model needs no etcd. */
const LANE_OF_FILE: Record<string, Lane> = {
  'test/contract/model-etcd.test.ts': 'fast',
};

/**
 * Files that keep the cores busy (many property runs, simulations): they never run beside a
 * timing-sensitive file, whose deadlines and measurements assume a core to itself.
 */
const CPU_HEAVY = ['test/property/', 'test/sim/'];

/** Files that measure or race real time: benchmarks on the lab, lease expiry, chaos with its writer. */
const TIMING_SENSITIVE = ['test/chaos/', 'test/e2e/kubernetes-control-plane.test.ts', 'test/e2e/kubernetes-certificates.test.ts', 'test/e2e/bench-lab.test.ts', 'test/e2e/bench-preload.test.ts', 'test/e2e/bench-kubernetes.test.ts', 'test/e2e/lease-clock.test.ts', 'test/e2e/parallel-learners.test.ts', 'test/e2e/management-failover.test.ts'];

const matches = (file: string, entries: readonly string[]): boolean => entries.some((entry) => (entry.endsWith('/') ? file.startsWith(entry) : file === entry));

const isCpuHeavy = (file: string): boolean => matches(file, CPU_HEAVY);
const isTimingSensitive = (file: string): boolean => matches(file, TIMING_SENSITIVE);

/** Whether `file` may start while `running` run: never a CPU-heavy file beside a timing-sensitive one. */
export function mayRunBeside(file: string, running: readonly string[]): boolean {
  if (isCpuHeavy(file) && running.some(isTimingSensitive)) return false;
  return !(isTimingSensitive(file) && running.some(isCpuHeavy));
}

/** The lane of a test file, or undefined when neither its folder (or one above) nor its name is listed. */
export function laneOf(file: string): Lane | undefined {
  const folder = Object.keys(LANE_OF_FOLDER).find((candidate) => file.startsWith(`${candidate}/`));
  return LANE_OF_FILE[file] ?? (folder === undefined ? undefined : LANE_OF_FOLDER[folder]);
}

/** Every `*.test.ts` under test/, as paths relative to the repository root. */
export function testFiles(root: string): string[] {
  return readdirSync(`${root}/test`, { recursive: true, encoding: 'utf8' })
    .filter((path) => path.endsWith('.test.ts'))
    .map((path) => `test/${path}`)
    .sort();
}

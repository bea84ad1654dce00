import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * How the runner measures a test file's CPU: the user and system time of every process the file
 * started, detached ones included (etcd, kube-apiserver, the lab's sshd and what it runs).
 *
 * A cgroup does that: a process and all it forks stay in their cgroup whatever they do (double
 * fork, setsid, another network namespace), and the cgroup sums their CPU (cpuacct.usage in v1,
 * usage_usec of cpu.stat in v2). Where no cgroup can be made (not root, no cgroupfs), a python3
 * wrapper sums the CPU of the processes reaped below it (getrusage RUSAGE_CHILDREN): a floor, since
 * detached processes are reaped by init. Neither: the file's CPU is unknown.
 */
export interface CpuMeter {
  /** What is measured, for the run's header. */
  readonly description: string;
  /** The command that runs `test` for `file`, measured. */
  command(file: string, test: string[]): string[];
  /** The file's CPU seconds once its command ended; the wrapper's fd 3 report is given. */
  cpuSeconds(file: string, report: string): number | undefined;
  /** Removes what the meter made. */
  close(): void;
}

const slug = (file: string): string => file.replaceAll('/', '_');

/** The cgroup hierarchy that accounts CPU and that this process may create groups in, if any. */
function cgroupRoot(): { dir: string; usage: (group: string) => number } | undefined {
  const v1 = '/sys/fs/cgroup/cpuacct';
  const v2 = ['/sys/fs/cgroup', '/sys/fs/cgroup/unified'].find((dir) => existsSync(join(dir, 'cgroup.controllers')));
  const candidates = [
    ...(existsSync(join(v1, 'cpuacct.usage')) ? [{ dir: v1, usage: (g: string) => Number(readFileSync(join(g, 'cpuacct.usage'), 'utf8')) / 1e9 }] : []),
    ...(v2 === undefined ? [] : [{ dir: v2, usage: (g: string) => Number(/^usage_usec (\d+)$/m.exec(readFileSync(join(g, 'cpu.stat'), 'utf8'))?.[1]) / 1e6 }]),
  ];
  return candidates.find(({ dir }) => {
    const probe = join(dir, `fastplane-tests-probe-${String(process.pid)}`);
    try {
      mkdirSync(probe);
      rmdirSync(probe);
      return true;
    } catch {
      return false;
    }
  });
}

function cgroupMeter(root: { dir: string; usage: (group: string) => number }): CpuMeter {
  const top = join(root.dir, `fastplane-tests-${String(process.pid)}`);
  mkdirSync(top);
  const groupOf = (file: string): string => join(top, slug(file));
  return {
    description: `every process of a file counted (cgroup ${root.dir})`,
    command: (file, test) => {
      mkdirSync(groupOf(file));
      // The shell joins the group, then becomes the test: everything it starts is counted.
      return ['sh', '-c', 'echo $$ > "$0/cgroup.procs" && exec "$@"', groupOf(file), ...test];
    },
    cpuSeconds: (file) => {
      const group = groupOf(file);
      const seconds = root.usage(group);
      // A process the file left running goes back to the top group, so the file's group can go.
      const left = readFileSync(join(group, 'cgroup.procs'), 'utf8').split('\n').filter((pid) => pid !== '');
      for (const pid of left) writeFileSync(join(root.dir, 'cgroup.procs'), pid);
      if (left.length > 0) process.stdout.write(`  note: ${file} left ${String(left.length)} process(es) running: ${left.join(' ')}\n`);
      rmdirSync(group);
      return Number.isFinite(seconds) ? seconds : undefined;
    },
    close: () => {
      rmdirSync(top);
    },
  };
}

/** Runs a command, then writes to fd 3 the CPU seconds of the processes reaped below it. */
const REAPED_CPU = `
import os, resource, signal, sys
child = os.fork()
if child == 0:
    os.close(3)
    os.execvp(sys.argv[1], sys.argv[1:])
signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C ends the tests; we wait for them
while True:
    pid, status = os.wait()
    if pid == child:
        break
usage = resource.getrusage(resource.RUSAGE_CHILDREN)
os.write(3, f"{usage.ru_utime + usage.ru_stime}\\n".encode())
sys.exit(os.waitstatus_to_exitcode(status))
`;

export function cpuMeter(): CpuMeter {
  const root = cgroupRoot();
  if (root !== undefined) return cgroupMeter(root);
  if (spawnSync('python3', ['-c', ''], { stdio: 'ignore' }).status === 0) {
    return {
      description: 'CPU of the processes reaped in a file\'s tree (no cgroup here: detached processes not counted, a floor)',
      command: (_file, test) => ['python3', '-c', REAPED_CPU, ...test],
      cpuSeconds: (_file, report) => (report.trim() === '' ? undefined : Number(report)),
      close: () => undefined,
    };
  }
  return { description: 'CPU not measured (no cgroup, no python3): a file never measured counts as its default share of a core (scripts/test-schedule.ts)', command: (_file, test) => test, cpuSeconds: () => undefined, close: () => undefined };
}

/** The machine's busy cores over the last WINDOW_MS, all processes counted, from /proc/stat; 0 where unreadable. */
export class MachineLoad {
  private static readonly SAMPLE_MS = 2_000;
  private static readonly WINDOW_MS = 10_000;
  private readonly samples: { at: number; busy: number; total: number }[] = [];
  private cores = 1;
  private readonly timer: NodeJS.Timeout;

  constructor() {
    this.sample();
    this.timer = setInterval(() => {
      this.sample();
    }, MachineLoad.SAMPLE_MS);
    this.timer.unref();
  }

  /** Busy cores: the busy share of all CPU time in the window, times the cores /proc/stat lists. */
  busyCores(): number {
    const first = this.samples[0];
    const last = this.samples.at(-1);
    if (first === undefined || last === undefined || last.total <= first.total) return 0;
    return ((last.busy - first.busy) / (last.total - first.total)) * this.cores;
  }

  stop(): void {
    clearInterval(this.timer);
  }

  private sample(): void {
    let text: string;
    try {
      text = readFileSync('/proc/stat', 'utf8');
    } catch {
      return;
    }
    // cpu  user nice system idle iowait irq softirq steal ...: idle and iowait are the time not busy.
    const fields = (/^cpu\s+(.*)$/m.exec(text)?.[1] ?? '').split(/\s+/).map(Number);
    const total = fields.slice(0, 8).reduce((sum, n) => sum + n, 0);
    const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
    this.cores = Math.max(1, (text.match(/^cpu\d+\s/gm) ?? []).length);
    const now = Date.now();
    this.samples.push({ at: now, busy: total - idle, total });
    while (this.samples.length > 1 && now - (this.samples[0]?.at ?? now) > MachineLoad.WINDOW_MS) this.samples.shift();
  }
}

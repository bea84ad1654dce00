import { readFileSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';

/** The host a benchmark ran on; loadAverage (1, 5, 15 min) says how much other work skewed it. */
export interface HostInfo {
  cpus: number;
  cpuModel: string;
  memoryGiB: number;
  os: string;
  kernel: string;
  node: string;
  loadAverage: number[];
}

/** 1, 5 and 15 min, as `uptime` prints them. */
export function loadAverage(): number[] {
  return loadavg().map((n) => Math.round(n * 100) / 100);
}

export function hostInfo(): HostInfo {
  let os = 'unknown';
  try {
    os = /^PRETTY_NAME="?([^"\n]*)"?$/m.exec(readFileSync('/etc/os-release', 'utf8'))?.[1] ?? os;
  } catch {
    // Not Linux: the kernel release still says something.
  }
  const cpuList = cpus();
  return {
    cpus: cpuList.length,
    cpuModel: cpuList[0]?.model.trim() ?? 'unknown',
    memoryGiB: Math.round(totalmem() / 1024 ** 3),
    os,
    kernel: release(),
    node: process.version,
    loadAverage: loadAverage(),
  };
}

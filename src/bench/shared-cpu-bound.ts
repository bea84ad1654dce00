/**
 * The shared-CPU term of a bound: machines that share one host's cores (the local provider's) cannot
 * do their CPU work faster than those cores allow. Each machine has work to do (CPU seconds, from the
 * calibration) that cannot start before its release time, and C identical cores do at most C CPU
 * seconds a second, one piece of work spreading over any of them (a Go program runs on every core).
 * So for every release time r_k, all the work released at r_k or later is still to do at r_k:
 *
 *   T >= max over k of ( r_k + (sum of w_i over the machines with r_i >= r_k) / C )
 *
 * the classic lower bound for preemptive scheduling with release times on identical machines. It is
 * an end bound only: it says when all the work can be done, not when any one machine's part is.
 * Pure, so it can be recomputed by hand from the inputs kept with it.
 */

export interface CpuWork {
  /** Index into the bound's readySeconds. */
  machine: number;
  /** The earliest the work may start, in seconds from the start of the run. */
  releaseAt: number;
  cpuSeconds: number;
}

export interface SharedCpuTerm {
  cores: number;
  work: CpuWork[];
  /** The release time the maximum is reached at, and the CPU seconds released then or later. */
  fromSeconds: number;
  cpuSecondsFrom: number;
  /** fromSeconds + cpuSecondsFrom / cores. */
  seconds: number;
}

const round = (s: number): number => Math.round(s * 1000) / 1000;

/** The term for `work` on `cores` cores; null without work (or without a core to count). */
export function sharedCpuTerm(cores: number, work: CpuWork[]): SharedCpuTerm | null {
  if (work.length === 0 || !(cores >= 1)) return null;
  let best: SharedCpuTerm | null = null;
  for (const { releaseAt } of work) {
    const from = work.filter((w) => w.releaseAt >= releaseAt).reduce((sum, w) => sum + w.cpuSeconds, 0);
    const seconds = releaseAt + from / cores;
    if (best === null || seconds > best.seconds) best = { cores, work, fromSeconds: round(releaseAt), cpuSecondsFrom: round(from), seconds: round(seconds) };
  }
  return best;
}

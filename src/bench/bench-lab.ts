import { copyFileSync, existsSync, linkSync, mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { stagedSnapshotPath } from '../adapters/providers/ssh/remote-scripts.ts';
import type { SnapshotSource } from '../domain/machine.ts';
import { CALIBRATION_PEAK_MACHINES } from './calibration.ts';
import { NetLab, type LabInfo } from './network-lab.ts';

/**
 * The network lab a bench with `--host-bandwidth` runs on: one namespace per host on a bridge, each
 * host's inbound link limited by `tc tbf` as its own NIC would be, machines on them through the ssh
 * provider. Catch-up then costs what a link allows, and learners catching up at once share nothing
 * but the leader.
 */

/** tc's rate syntax: a number and bit, kbit, mbit or gbit. */
const RATE = /^\d+(\.\d+)?(bit|kbit|mbit|gbit)$/i;

export function isTcRate(text: string): boolean {
  return RATE.test(text);
}

/** The lab number a bench uses (FPL_LAB picks another, as for scripts/netlab.sh). */
export function benchLabNumber(env: NodeJS.ProcessEnv = process.env): number {
  const text = env.FPL_LAB;
  return text !== undefined && /^\d+$/.test(text) && Number(text) <= 255 ? Number(text) : 90;
}

export class BenchLab {
  private constructor(
    private readonly lab: NetLab,
    readonly info: LabInfo,
    readonly bandwidth: string,
  ) {}

  /** Hosts for a bench of `replicas`: the runs' machines, and the calibration's at its peak. */
  static hostsFor(replicas: number): number {
    return Math.max(replicas, CALIBRATION_PEAK_MACHINES);
  }

  /** A fresh lab (one left with its number is removed first), each host's inbound link at `bandwidth`. */
  static open(replicas: number, bandwidth: string, labNumber = benchLabNumber()): BenchLab {
    const lab = new NetLab(labNumber);
    const hosts = BenchLab.hostsFor(replicas);
    const info = lab.up(hosts);
    try {
      lab.inboundRate(bandwidth);
    } catch (error) {
      lab.down();
      throw error;
    }
    return new BenchLab(lab, info, bandwidth);
  }

  /** `spec.provider` for machines on the lab's hosts. */
  providerFields(): Record<string, unknown> {
    return { name: 'ssh', identityFile: this.info.identityFile, knownHostsFile: this.info.knownHostsFile, hosts: this.info.hosts.map((h) => ({ address: h.address, user: 'root' })) };
  }

  /** A member's etcd log, read from its host's directory (the lab's hosts keep theirs on this disk). */
  memberLog(cluster: string, machine: string): string | null {
    for (const host of this.info.hosts) {
      const path = join(host.baseDir, 'clusters', cluster, machine, 'etcd.log');
      if (existsSync(path)) return readFileSync(path, 'utf8');
    }
    return null;
  }

  /**
   * The snapshot staged on every host, where the ssh provider restores it without a copy over the
   * host's link: a hard link into each host's directory (all on this disk), a copy where none can be.
   */
  stageSnapshot(snapshot: SnapshotSource): void {
    for (const host of this.info.hosts) {
      const staged = stagedSnapshotPath(host.baseDir, snapshot.sha256);
      if (existsSync(staged)) continue;
      mkdirSync(join(host.baseDir, 'snapshots'), { recursive: true });
      try {
        linkSync(snapshot.file, staged);
      } catch {
        copyFileSync(snapshot.file, staged);
      }
    }
  }

  down(): void {
    this.lab.down();
  }
}

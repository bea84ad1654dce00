import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { CALIBRATION_PEAK_MACHINES } from './calibration.ts';
import { NetLab, type LabInfo, type LinkBytes } from './network-lab.ts';

/**
 * The network lab a bench with `--host-bandwidth` runs on: one namespace per host on a bridge, each
 * host's link limited by `tc tbf` in both directions as its own full-duplex NIC would be, machines on
 * them through the ssh provider. Catch-up then costs what both links allow: learners catching up at
 * once share the leader's uplink, as they would on real hosts. Nothing is staged on a host: a
 * snapshot a host restores crosses its link inside the timed window.
 *
 * `inbound-only` (the bench's --asymmetric-lab) limits only what each host receives, as this lab did
 * before: a leader then sends to every learner at once at a multiple of its own link's rate.
 */

/** Which directions of each host's link the lab limits; `none` for UNLIMITED. */
export type LinkLimit = 'both-directions' | 'inbound-only' | 'none';

/** `--host-bandwidth unlimited`: the lab's hosts with no tc limit, only what the veths and bridge carry. */
export const UNLIMITED = 'unlimited';

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
    readonly linkLimit: LinkLimit,
  ) {}

  /** Hosts for a bench of `replicas`: the runs' machines, and the calibration's at its peak. */
  static hostsFor(replicas: number): number {
    return Math.max(replicas, CALIBRATION_PEAK_MACHINES);
  }

  /** A fresh lab (one left with its number is removed first), each host's link at `bandwidth`. */
  static open(replicas: number, bandwidth: string, linkLimit: LinkLimit = 'both-directions', labNumber = benchLabNumber()): BenchLab {
    const lab = new NetLab(labNumber);
    const hosts = BenchLab.hostsFor(replicas);
    const info = lab.up(hosts);
    try {
      if (bandwidth === UNLIMITED || linkLimit === 'none') return new BenchLab(lab, info, UNLIMITED, 'none');
      if (linkLimit === 'both-directions') lab.linkRate(bandwidth);
      else lab.inboundRate(bandwidth);
    } catch (error) {
      lab.down();
      throw error;
    }
    return new BenchLab(lab, info, bandwidth, linkLimit);
  }

  /** Bytes each host has sent and received so far, by its address. */
  linkBytes(): Map<string, LinkBytes> {
    const byIndex = this.lab.linkBytes();
    return new Map(this.info.hosts.map((h) => [h.address, byIndex.get(h.index) ?? { sent: 0, received: 0 }]));
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

  down(): void {
    this.lab.down();
  }
}

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

// src/bench and dist/cli (the bundle this code is built into) both sit two folders below the package root.
const SCRIPT = join(import.meta.dirname, '..', '..', 'scripts', 'netlab.sh');

export interface LabHost {
  index: number;
  namespace: string;
  address: string;
  /** The host's private directory, seen on the host as /var/lib/fastplane. */
  baseDir: string;
  sshdPid: number;
}

export interface LabInfo {
  lab: number;
  dir: string;
  bridgeAddress: string;
  identityFile: string;
  knownHostsFile: string;
  hosts: LabHost[];
}

export interface LinkBytes {
  sent: number;
  received: number;
}

export class NetLabError extends Error {
  override readonly name = 'NetLabError';
}

/** A host set for the fault commands: host numbers (1-based) or 'fp' for fastplane's side. */
export type HostSet = (number | 'fp')[];

/**
 * scripts/netlab.sh driven from code (the bench's --host-bandwidth, the network tests): one lab per
 * user (its own FPL_LAB number, so labs never share names or addresses), faults as nftables rules and
 * tc qdiscs of the lab's own namespaces and bridge ports, and `down` that removes every namespace,
 * veth, the bridge and every process in the namespaces, by PID.
 */
export class NetLab {
  private upDone = false;

  constructor(readonly lab: number) {}

  private run(args: string[], timeoutMs = 60_000): string {
    try {
      return execFileSync('bash', [SCRIPT, ...args], { env: { ...process.env, FPL_LAB: String(this.lab) }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: timeoutMs });
    } catch (error) {
      // The script says what is wrong (not root, no namespaces here, a bad rate) on stderr.
      const { stderr, status, signal } = error as { stderr?: unknown; status?: unknown; signal?: unknown };
      const how = typeof signal === 'string' ? `killed by ${signal} (timeout ${String(timeoutMs)} ms?)` : `exit ${String(status)}`;
      throw new NetLabError(typeof stderr === 'string' && stderr.trim() !== '' ? stderr.trim() : `netlab ${args[0] ?? ''} failed: ${how}`, { cause: error });
    }
  }

  /** Creates the lab; a lab left behind by an earlier crashed run with this number is removed first. */
  up(hosts: number): LabInfo {
    this.down();
    this.upDone = true;
    return JSON.parse(this.run(['up', String(hosts)])) as LabInfo;
  }

  info(): LabInfo {
    return JSON.parse(this.run(['status'])) as LabInfo;
  }

  manifest(name: string): string {
    return this.run(['manifest', name]);
  }

  partition(a: HostSet, b: HostSet): void {
    this.run(['partition', a.join(','), b.join(',')]);
  }

  oneway(from: HostSet, to: HostSet): void {
    this.run(['oneway', from.join(','), to.join(',')]);
  }

  loss(percent: number, hosts?: HostSet): void {
    this.run(['loss', String(percent), ...(hosts ? [hosts.join(',')] : [])]);
  }

  rate(rate: string, hosts?: HostSet): void {
    this.run(['rate', rate, ...(hosts ? [hosts.join(',')] : [])]);
  }

  /** Limits only what each host receives, e.g. `100mbit`: an asymmetric link no real NIC has. */
  inboundRate(rate: string, hosts?: HostSet): void {
    this.run(['inrate', rate, ...(hosts ? [hosts.join(',')] : [])]);
  }

  /** Limits what each host sends and what it receives, each to `rate`: its own full-duplex NIC. */
  linkRate(rate: string, hosts?: HostSet): void {
    this.run(['link', rate, ...(hosts ? [hosts.join(',')] : [])]);
  }

  /**
   * Bytes each host has sent and received over its link so far, by host number: the counters of its
   * bridge port, whose transmit is the host's receive.
   */
  linkBytes(): Map<number, LinkBytes> {
    const counter = (port: string, name: string): number => Number(readFileSync(`/sys/class/net/${port}/statistics/${name}`, 'utf8').trim());
    return new Map(
      this.info().hosts.map((h) => {
        const port = `fpl-${String(this.lab)}-v${String(h.index)}`;
        return [h.index, { sent: counter(port, 'rx_bytes'), received: counter(port, 'tx_bytes') }];
      }),
    );
  }

  heal(): void {
    if (this.upDone) this.run(['heal']);
  }

  /** Kills every process in the lab's namespaces first: on a loaded host that can take minutes. */
  down(): void {
    this.run(['down'], 300_000);
    this.upDone = false;
  }
}

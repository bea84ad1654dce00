import { execFileSync } from 'node:child_process';
import { join } from 'node:path';

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

/** A host set for the fault commands: host numbers (1-based) or 'fp' for fastplane's side. */
export type HostSet = (number | 'fp')[];

/**
 * scripts/netlab.sh from tests: one lab per test file (its own FPL_LAB number, so labs never share
 * names or addresses), faults as nftables rules inside the lab's namespaces, and `down` that removes
 * every namespace, veth, the bridge and every process in the namespaces, by PID.
 */
export class NetLab {
  private upDone = false;

  constructor(readonly lab: number) {}

  private run(args: string[]): string {
    return execFileSync('bash', [SCRIPT, ...args], { env: { ...process.env, FPL_LAB: String(this.lab) }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], timeout: 60_000 });
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

  heal(): void {
    if (this.upDone) this.run(['heal']);
  }

  down(): void {
    this.run(['down']);
    this.upDone = false;
  }
}

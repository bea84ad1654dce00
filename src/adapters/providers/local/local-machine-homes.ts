import { hostname } from 'node:os';
import { bootId } from '../../host/process-identity.ts';
import type { MachineInfra } from '../../../ports/machine-provider.ts';
import type { StoredClusterState } from '../../stored-cluster-state.ts';

/** Where a local machine lives: its processes and data dir exist on that host, under that state dir only. */
interface MachineHome {
  name: string;
  host: string;
  /** Tells two hosts of one name apart; absent where /proc does not say. */
  bootId?: string;
  stateDir: string;
  address: string;
  clientURL: string;
  peerURL: string;
}

/**
 * A local machine is reachable only from its own host and state dir. Its home is recorded beside the
 * cluster's records, so a process elsewhere that shares the store (another host, another state dir)
 * reports the machine as out of its reach, never as gone, and refuses to act on it.
 */
export class LocalMachineHomes {
  private readonly here: { host: string; bootId?: string; stateDir: string };

  constructor(stateDir: string) {
    const boot = bootId();
    this.here = { host: hostname(), stateDir, ...(boot === undefined ? {} : { bootId: boot }) };
  }

  async record(state: StoredClusterState, machine: Pick<MachineHome, 'name' | 'address' | 'clientURL' | 'peerURL'>): Promise<void> {
    const home: MachineHome = { ...machine, ...this.here };
    await state.writeRecord(key(machine.name), home);
  }

  async forget(state: StoredClusterState, name: string): Promise<void> {
    await state.deleteRecord(key(name));
  }

  /** Names of the cluster's machines recorded anywhere. */
  async names(state: StoredClusterState): Promise<string[]> {
    return (await state.recordKeys(PREFIX)).map((k) => k.slice(PREFIX.length));
  }

  /** Why this process cannot reach the machine, when it lives elsewhere; undefined when it lives here or nowhere. */
  async elsewhere(state: StoredClusterState, name: string): Promise<{ home: MachineHome; reason: string } | undefined> {
    const home = await state.readRecord<MachineHome>(key(name));
    if (!home) return undefined;
    const sameHost = home.bootId !== undefined && this.here.bootId !== undefined ? home.bootId === this.here.bootId : home.host === this.here.host;
    if (sameHost && home.stateDir === this.here.stateDir) return undefined;
    return { home, reason: `machine ${name} runs on host ${home.host} under state dir ${home.stateDir}; this process (host ${this.here.host}, state dir ${this.here.stateDir}) cannot reach its processes: run fastplane there` };
  }

  /**
   * A machine elsewhere as this process can describe it: provisioned, its member taken to run (etcd's
   * own health says more), and the reason it is out of reach.
   */
  static describe(found: { home: MachineHome; reason: string }): MachineInfra {
    const { home, reason } = found;
    return { name: home.name, address: home.address, clientURL: home.clientURL, peerURL: home.peerURL, state: 'Provisioned', memberRunning: true, unreachable: reason };
  }
}

const PREFIX = 'home/';

function key(name: string): string {
  return PREFIX + name;
}

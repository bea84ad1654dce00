import type { MachineInfra } from '../../../ports/machine-provider.ts';
import type { SshTarget } from './ssh-connections.ts';

/** A machine of the ssh provider as its record in the store holds it. */
export type SshMachineState = 'Provisioning' | 'Provisioned' | 'Failed';

export interface SshMachineFile {
  cluster: string;
  name: string;
  ordinal: number;
  failureDomain?: string;
  host?: SshTarget;
  /** The host came from the create hook: the delete hook gets it back. */
  hooked?: boolean;
  clientURL: string;
  peerURL: string;
  createdAt: number;
  /** The end of the provider's provisioning delay (spec.provider.provisioningDelay): nothing is done before. */
  readyAt?: number;
  /** When it became Provisioned. */
  provisionedAt?: number;
  state: SshMachineState;
  failureMessage?: string;
  /** While Provisioning: what it waits for (a free host, its host to answer). */
  waiting?: string;
  deleting?: boolean;
}

export const MACHINE = 'machine/';

export function machineKey(name: string): string {
  return MACHINE + name;
}

export function hostKey(host: SshTarget): string {
  return `${host.address}:${String(host.port)}`;
}

export function identity(machine: SshMachineFile): Pick<MachineInfra, 'name' | 'address' | 'clientURL' | 'peerURL'> {
  return { name: machine.name, address: machine.host?.address ?? '', clientURL: machine.clientURL, peerURL: machine.peerURL };
}

export function owner(machine: { cluster: string; name: string }): string {
  return `${machine.cluster}/${machine.name}`;
}

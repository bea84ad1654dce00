import type { MachinePhase } from '../domain/machine.ts';

/** How a membership change ended, as `fastplane events` says it (Succeeded, Refused, Failed). */
export type ChangeResult = 'ok' | 'refused' | 'failed';

/**
 * What the controller reports, as a port: the CLI backs it with prom-client, simulations with
 * nothing (the controller's core does not depend on prom-client).
 */
export interface ControllerMetrics {
  reconcileDuration(cluster: string, seconds: number): void;
  membershipChange(cluster: string, action: string, result: ChangeResult): void;
  etcdRefusal(cluster: string, reason: string): void;
  machines(cluster: string, byPhase: Partial<Record<MachinePhase, number>>): void;
  controlPlaneReady(cluster: string, ready: boolean): void;
  /** From when this replica saw a generation that was not converged to the pass that found it converged. */
  timeToReady(seconds: number): void;
  leader(cluster: string, leading: boolean): void;
  /** The cluster is gone: its series go too. */
  forget(cluster: string): void;
}

import type { ControlPlaneEndpoint, EndpointBackend } from '../../ports/machine-provider.ts';
import { getText } from '../host/http-probe.ts';

/** Where the machines the endpoint should route to are recorded: fastplane's own record, never the balancer. */
export interface RoutesRecord {
  read(): Promise<string[] | undefined>;
  write(machines: string[]): Promise<void>;
}

const PROBE_TIMEOUT_MS = 3_000;

/**
 * A load balancer of the user's own in front of the apiservers: fastplane never configures it and
 * only checks it. `route()` records which machines it should send traffic to (the ready ones, as for
 * HAProxy), for the user's balancer to follow by its own health checks; `routes()` gives those
 * machines, each up when `/readyz` through the balancer answers 200 with a certificate of the
 * cluster's Kubernetes CA. `stop()` leaves it alone: it is not fastplane's.
 */
export class CheckedEndpoint implements ControlPlaneEndpoint {
  constructor(
    /** host:port clients use (6443 when the manifest names none). */
    readonly address: string,
    private readonly record: RoutesRecord,
    /** The Kubernetes CA the apiservers' certificates chain to, on this host. */
    private readonly caFile: () => Promise<string>,
  ) {}

  async route(backends: readonly EndpointBackend[]): Promise<void> {
    await this.record.write(backends.map(({ machine }) => machine));
  }

  async routes(): Promise<{ machine: string; up: boolean }[] | undefined> {
    const machines = await this.record.read();
    if (machines === undefined) return undefined;
    const up = await this.ready();
    return machines.map((machine) => ({ machine, up }));
  }

  stop(): Promise<void> {
    return Promise.resolve();
  }

  private async ready(): Promise<boolean> {
    try {
      const answer = await getText(`https://${this.address}/readyz`, { kind: 'ca', caFile: await this.caFile() }, PROBE_TIMEOUT_MS);
      return answer.status === 200;
    } catch {
      return false;
    }
  }
}

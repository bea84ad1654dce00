import { KUBERNETES_COMPONENTS, type ComponentKind, type KubernetesComponent, type KubernetesMachines } from '../ports/machine-provider.ts';
import { residentBytes, type ComponentPids } from './process-memory.ts';
import { pollUntilStopped } from './polling.ts';

/**
 * Watches a Kubernetes control plane's machines from outside the reconcile loop while a run goes on,
 * every 100 ms: when each component first answered healthy (the apiserver's `/readyz`, the others'
 * `/healthz`, asked through the provider as the loop asks), and each process's resident memory
 * (VmRSS of the PIDs the provider recorded), keeping the peak per component per machine and the
 * peak of their sum over the whole control plane.
 */

const POLL_MS = 100;

export interface WatchedComponents {
  /** Epoch ms each component of each machine was first seen healthy, by machine name. */
  healthyAt: Map<string, Partial<Record<KubernetesComponent, number>>>;
  /** Peak resident bytes per component, by machine name. */
  peakRssBytes: Map<string, Partial<Record<ComponentKind, number>>>;
  /** Peak, over the samples, of every recorded process's resident bytes summed. */
  controlPlanePeakRssBytes: number;
  samples: number;
  intervalMs: number;
}

export class ComponentWatcher {
  private readonly healthyAt = new Map<string, Partial<Record<KubernetesComponent, number>>>();
  private readonly peaks = new Map<string, Partial<Record<ComponentKind, number>>>();
  private controlPlanePeak = 0;
  private samples = 0;
  private stopped = false;
  private loop: Promise<void> | undefined;

  constructor(
    private readonly cluster: string,
    private readonly kubernetes: KubernetesMachines | undefined,
    /** The cluster's machines now (new ones appear during a bring-up). */
    private readonly machines: () => Promise<string[]>,
    private readonly pids: (machine: string) => ComponentPids,
  ) {}

  start(): void {
    this.loop = this.run();
  }

  async stop(): Promise<WatchedComponents> {
    this.stopped = true;
    await this.loop;
    return { healthyAt: this.healthyAt, peakRssBytes: this.peaks, controlPlanePeakRssBytes: this.controlPlanePeak, samples: this.samples, intervalMs: POLL_MS };
  }

  /** A machine going or a component restarting between two reads: the next tick reads again. */
  private async run(): Promise<void> {
    await pollUntilStopped(POLL_MS, () => this.tick(), () => this.stopped);
  }

  private async tick(): Promise<void> {
    const names = await this.machines();
    this.weigh(names);
    const kubernetes = this.kubernetes;
    if (kubernetes === undefined) return;
    await Promise.all(
      names.map(async (name) => {
        const seen = this.healthyAt.get(name) ?? {};
        if (KUBERNETES_COMPONENTS.every((c) => seen[c] !== undefined)) return;
        // One machine not answering (still provisioning, going) leaves the others' readings alone.
        const health = await kubernetes.componentHealth(this.cluster, name).catch(() => undefined);
        if (health === undefined) return;
        const at = Date.now();
        for (const component of KUBERNETES_COMPONENTS) if (health[component].healthy) seen[component] ??= at;
        this.healthyAt.set(name, seen);
      }),
    );
  }

  private weigh(names: string[]): void {
    let total = 0;
    for (const name of names) {
      const peak = this.peaks.get(name) ?? {};
      for (const [kind, pid] of Object.entries(this.pids(name)) as [ComponentKind, number][]) {
        const bytes = residentBytes(pid);
        if (bytes === undefined) continue;
        total += bytes;
        peak[kind] = Math.max(peak[kind] ?? 0, bytes);
      }
      this.peaks.set(name, peak);
    }
    this.controlPlanePeak = Math.max(this.controlPlanePeak, total);
    this.samples++;
  }
}

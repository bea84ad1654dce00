import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { MachinePhase } from '../domain/machine.ts';
import type { ChangeResult, ControllerMetrics } from './controller-metrics.ts';

const PHASES: readonly MachinePhase[] = ['Pending', 'Provisioning', 'Provisioned', 'Initializing', 'Joining', 'Learner', 'Voter', 'Deleting', 'Failed'];

/** The controller's metrics in a prom-client registry of its own, with the default process metrics. */
export class PrometheusMetrics implements ControllerMetrics {
  readonly registry = new Registry();
  private readonly duration = new Histogram({
    name: 'fastplane_reconcile_duration_seconds',
    help: 'Duration of one reconcile pass (observe, plan, record, execute)',
    labelNames: ['cluster'],
    buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  private readonly changes = new Counter({
    name: 'fastplane_membership_changes_total',
    help: 'etcd membership changes attempted, by action and result (ok, refused, failed as in fastplane events)',
    labelNames: ['cluster', 'action', 'result'],
    registers: [this.registry],
  });
  private readonly refusals = new Counter({
    name: 'fastplane_etcd_refusals_total',
    help: 'Membership calls etcd refused ("not now"), by the refusal',
    labelNames: ['cluster', 'reason'],
    registers: [this.registry],
  });
  private readonly machineGauge = new Gauge({
    name: 'fastplane_machines',
    help: 'Machines of a control plane by phase, as the last pass recorded them',
    labelNames: ['cluster', 'phase'],
    registers: [this.registry],
  });
  private readonly ready = new Gauge({
    name: 'fastplane_control_plane_ready',
    help: '1 when the control plane is Available (quorum of healthy voters), else 0',
    labelNames: ['cluster'],
    registers: [this.registry],
  });
  private readonly toReady = new Histogram({
    name: 'fastplane_time_to_ready_seconds',
    help: 'From a new generation (as this replica saw it) to the pass that found it converged',
    buckets: [1, 5, 15, 30, 60, 120, 300, 600, 1200, 3600],
    registers: [this.registry],
  });
  private readonly leading = new Gauge({
    name: 'fastplane_cluster_leader',
    help: '1 for each control plane whose lease this replica holds',
    labelNames: ['cluster'],
    registers: [this.registry],
  });

  constructor() {
    collectDefaultMetrics({ register: this.registry });
  }

  reconcileDuration(cluster: string, seconds: number): void {
    this.duration.observe({ cluster }, seconds);
  }

  membershipChange(cluster: string, action: string, result: ChangeResult): void {
    this.changes.inc({ cluster, action, result });
  }

  etcdRefusal(cluster: string, reason: string): void {
    this.refusals.inc({ cluster, reason });
  }

  machines(cluster: string, byPhase: Partial<Record<MachinePhase, number>>): void {
    for (const phase of PHASES) this.machineGauge.set({ cluster, phase }, byPhase[phase] ?? 0);
  }

  controlPlaneReady(cluster: string, ready: boolean): void {
    this.ready.set({ cluster }, ready ? 1 : 0);
  }

  timeToReady(seconds: number): void {
    this.toReady.observe(seconds);
  }

  leader(cluster: string, leading: boolean): void {
    this.leading.set({ cluster }, leading ? 1 : 0);
  }

  forget(cluster: string): void {
    for (const phase of PHASES) this.machineGauge.remove({ cluster, phase });
    this.ready.remove({ cluster });
    this.leading.remove({ cluster });
  }
}

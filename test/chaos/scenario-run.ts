import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { CliEnv, pidsUnder, type CliRun } from '../support/cli.ts';
import { adminFor, type ClusterAccess } from '../support/etcd-direct.ts';
import { ContinuousWriter, type WriterReport } from './writer.ts';
import { NetLab, type LabInfo } from '../support/netlab.ts';

/** Who guards membership changes in the scenario's cluster: etcd's own checks, or fastplane's (guarded). */
export type ReconfigurationMode = 'etcd' | 'fastplane';

export interface ScenarioResult extends WriterReport {
  name: string;
  mode: ReconfigurationMode;
  converged: boolean;
  seconds: number;
  /** What the scenario expects of fastplane beyond convergence, and whether it held. */
  expectation: string;
  expectationMet: boolean;
  /** The end of fastplane's own output, to explain a failed scenario. */
  detail: string;
}

/** What a scenario does to a running cluster, and what it expects fastplane to end with. */
export interface ChaosScenario {
  name: string;
  /** Unused loopback range, so scenarios never share addresses. */
  addressPrefix: string;
  /** Spec of the cluster the scenario starts from; none: the scenario creates it (and starts the writer). */
  spec?: Record<string, unknown>;
  /** Inflicts the fault and drives fastplane until it is done; returns the final CLI run. */
  act(s: ScenarioRun): Promise<{ run: CliRun; expectationMet: boolean }>;
  expectation: string;
  /** Whether fastplane is expected to converge (false: a safety gate must hold instead). */
  converges: boolean;
  /** Machines are hosts of a network lab (its own FPL_LAB number), reached by the ssh provider. */
  lab?: { number: number; hosts: number };
}

/** Polls until the check returns a value, or fails after the timeout. */
export async function waitFor<T>(what: string, check: () => Promise<T | undefined> | T | undefined, timeoutMs = 60_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The context a scenario acts in: its own state dir, cluster, writer and helpers. */
export class ScenarioRun {
  readonly cluster = 'chaos';
  writer: ContinuousWriter | undefined;

  /** The network lab, its hosts and the ssh provider spec for them, for scenarios on a lab. */
  lab: { lab: NetLab; info: LabInfo; provider: Record<string, unknown> } | undefined;

  constructor(
    readonly env: CliEnv,
    public access: ClusterAccess,
    readonly mode: ReconfigurationMode = 'etcd',
  ) {}

  /** A spec in this run's reconfiguration mode. */
  withMode(spec: Record<string, unknown>): Record<string, unknown> {
    return withMode(spec, this.mode);
  }

  /** Starts the continuous writer against the cluster as it is now. */
  startWriter(access: ClusterAccess = this.access): void {
    this.access = access;
    this.writer = new ContinuousWriter(access);
    this.writer.start();
  }

  /** The status document as fastplane reports it now (read-only: safe beside a running reconcile). */
  async status(): Promise<ControlPlaneStatusDocument> {
    const run = await this.env.run(['status', this.cluster, '-o', 'json']);
    return JSON.parse(run.stdout) as ControlPlaneStatusDocument;
  }

  fastplane(args: string[], extraEnv: Record<string, string> = {}): Promise<CliRun> {
    return this.env.run([...args, '--timeout', '90s', '-o', 'json'], extraEnv);
  }

  background(args: string[], extraEnv: Record<string, string> = {}): ReturnType<CliEnv['start']> {
    return this.env.start([...args, '--timeout', '90s', '-o', 'json'], extraEnv);
  }

  /** Kills a machine's etcd process by PID (SIGKILL unless told otherwise). */
  kill(machine: string, signal: NodeJS.Signals = 'SIGKILL'): void {
    for (const pid of pidsUnder(this.machineDir(machine))) process.kill(pid, signal);
  }

  machineDir(machine: string): string {
    return join(this.env.stateDir, 'clusters', this.cluster, 'machines', machine);
  }

  /** The machine whose member leads now, asked of etcd. */
  async leader(): Promise<string> {
    const admin = adminFor(this.access, { callTimeoutMs: 1000 });
    try {
      const members = await admin.memberList(this.access.endpoints);
      for (const m of members) {
        const url = m.clientURLs[0];
        if (url === undefined || m.isLearner) continue;
        const status = await admin.status(url).catch(() => undefined);
        if (status && status.leaderId === status.memberId) return m.name;
      }
    } finally {
      await admin.close();
    }
    throw new Error('no leader found');
  }

  /**
   * Waits until etcd lists `count` learners with their names (started), calling `onNamed` on each as
   * soon as it is; returns their names in the order they were seen.
   */
  async namedLearners(count: number, onNamed: (name: string) => void = () => undefined, timeoutMs = 60_000): Promise<string[]> {
    const named: string[] = [];
    await waitFor(
      `${String(count)} named learners`,
      async () => {
        const admin = adminFor(this.access, { callTimeoutMs: 500 });
        try {
          for (const m of await admin.memberList(this.access.endpoints)) {
            if (!m.isLearner || m.name === '' || named.includes(m.name)) continue;
            onNamed(m.name);
            named.push(m.name);
          }
        } catch {
          // A member list that fails is asked again.
        } finally {
          await admin.close();
        }
        return named.length >= count ? true : undefined;
      },
      timeoutMs,
    );
    return named;
  }

  /** Waits until etcd lists a learner (added, maybe not started yet); resolves with its peer URL. */
  learnerListed(timeoutMs?: number): Promise<string> {
    return waitFor(
      'a learner',
      async () => {
        const admin = adminFor(this.access, { callTimeoutMs: 500 });
        try {
          return (await admin.memberList(this.access.endpoints)).find((m) => m.isLearner)?.peerURLs[0];
        } catch {
          return undefined;
        } finally {
          await admin.close();
        }
      },
      timeoutMs,
    );
  }

  machineNames(): string[] {
    return this.env.machines(this.cluster).map((m) => m.name);
  }

  /** The machine was deleted (a later machine may carry its freed name). */
  deleted(name: string): boolean {
    return this.env.wasDeleted(this.cluster, name);
  }
}


/** A run that exited 0 converged. */
export function converged(run: CliRun): boolean {
  return run.code === 0;
}

function withMode(spec: Record<string, unknown>, mode: ReconfigurationMode): Record<string, unknown> {
  if (mode === 'etcd') return spec;
  const etcd = typeof spec.etcd === 'object' && spec.etcd !== null ? spec.etcd : {};
  return { ...spec, etcd: { ...etcd, reconfigurationCheck: mode } };
}

/**
 * Runs one scenario end to end with the continuous writer, in the given reconfiguration mode; cleans
 * up every process it started. CHAOS_ADDRESS_PREFIX puts every scenario on one other loopback range
 * (a run beside another engineer's).
 */
export async function runScenario(scenario: ChaosScenario, mode: ReconfigurationMode = 'etcd'): Promise<ScenarioResult> {
  const env = new CliEnv(process.env.CHAOS_ADDRESS_PREFIX ?? scenario.addressPrefix);
  const lab = scenario.lab && new NetLab(scenario.lab.number);
  try {
    let s: ScenarioRun;
    let labSetup: ScenarioRun['lab'];
    if (lab && scenario.lab) {
      const info = lab.up(scenario.lab.hosts);
      labSetup = { lab, info, provider: { name: 'ssh', identityFile: info.identityFile, knownHostsFile: info.knownHostsFile, hosts: info.hosts.map((h) => ({ address: h.address })) } };
    }
    if (scenario.spec) {
      const spec = withMode(labSetup ? { ...scenario.spec, provider: labSetup.provider } : scenario.spec, mode);
      const up = await env.run(['up', '-f', env.writeManifest('chaos', spec), '--timeout', '90s', '-o', 'json']);
      if (up.code !== 0) throw new Error(`setup failed: ${up.stderr.slice(-500)}`);
      s = new ScenarioRun(env, (JSON.parse(up.stdout) as ControlPlaneStatusDocument).status, mode);
      s.lab = labSetup;
      s.startWriter();
    } else {
      s = new ScenarioRun(env, { endpoints: [] }, mode);
      s.lab = labSetup;
    }
    const started = Date.now();
    let outcome: { run: CliRun; expectationMet: boolean };
    try {
      outcome = await scenario.act(s);
    } catch (error) {
      // What fastplane did up to the failure, for the reader of a failed run's log.
      const events = env.events(s.cluster).slice(-30).map((e) => `${new Date(e.at).toISOString()} ${e.action ?? e.reason} ${e.machine ?? ''} ${e.outcome ?? ''}: ${e.message}`);
      throw new Error(`${error instanceof Error ? error.message : String(error)}\nlast events:\n${events.join('\n')}`, { cause: error });
    } finally {
      await s.writer?.stop();
    }
    const seconds = (Date.now() - started) / 1000;
    const finalDoc = await s.status();
    const report = s.writer ? await s.writer.verify(finalDoc.status) : { writesAcked: 0, writesFailed: 0, ackedButLost: 0, longestOutageMs: 0 };
    return {
      name: scenario.name,
      mode,
      converged: converged(outcome.run),
      seconds,
      ...report,
      expectation: scenario.expectation,
      expectationMet: outcome.expectationMet,
      detail: outcome.run.stderr.split('\n').slice(-25).join('\n'),
    };
  } finally {
    // The lab first: its down stops every process in its namespaces (the members), by PID.
    lab?.down();
    env.cleanup();
  }
}

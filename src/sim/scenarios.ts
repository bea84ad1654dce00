import type { ControlPlane } from '../api/control-plane.ts';
import type { DurationRange } from '../api/duration.ts';
import { manifestFor, statsOf, type Strategy, type StrategyStats } from './compare.ts';
import { Simulation } from './simulate.ts';

/**
 * What fastplane would change for one control plane (a converted KubeadmControlPlane, say): the same
 * manifest run in KCP's one-machine-at-a-time order (`serial`) and in fastplane's parallel order, for
 * a bring-up, a rollout to a new version, and the remediation of one failed voter. `wide-rollout`
 * is the rollout again with fastplane's surge raised to the replica count, which KCP cannot do (its
 * webhook allows maxSurge 0 or 1). Each run is a fresh Simulation on virtual time; run i of both
 * orders uses the same seed, so both see the same provisioning draws.
 */

export type ScenarioName = 'bring-up' | 'rollout' | 'wide-rollout' | 'remediation';
export const SCENARIOS: readonly ScenarioName[] = ['bring-up', 'rollout', 'wide-rollout', 'remediation'];

export interface ScenarioOptions {
  base: ControlPlane;
  provisioning: DurationRange;
  runs: number;
  seed: number;
  /** Virtual time one phase may take before the run counts as not converged (default 12 h). */
  timeoutMs?: number;
}

export interface ScenarioComparison {
  scenario: ScenarioName;
  /** What the scenario does to this manifest, for the table. */
  description: string;
  serial: StrategyStats;
  parallel: StrategyStats;
  /** serial p50 / parallel p50. */
  speedup: number;
}

/** The version a rollout goes to: the next patch, which is all the model needs to tell members apart. */
export function rolloutTarget(version: string): string {
  const [major, minor, patch] = version.split('.');
  return `${major ?? '0'}.${minor ?? '0'}.${String(Number(patch ?? '0') + 1)}`;
}

function describe(scenario: ScenarioName, manifest: ControlPlane): string {
  const { replicas, version, rollout } = manifest.spec;
  switch (scenario) {
    case 'bring-up':
      return `bring-up 0 -> ${String(replicas)}`;
    case 'rollout':
      return `rollout ${version} -> ${rolloutTarget(version)}, maxSurge ${String(rollout.maxSurge)}`;
    case 'wide-rollout':
      return `the same rollout, fastplane at maxSurge ${String(replicas)}`;
    case 'remediation':
      return 'remediation of 1 failed voter';
  }
}

/**
 * Virtual ms the scenario takes on one seed: for a rollout or remediation, from the change (new version
 * applied, a voter's process killed) on a converged control plane to convergence again.
 */
export async function scenarioTime(scenario: ScenarioName, manifest: ControlPlane, provisioning: DurationRange, seed: number, timeoutMs: number): Promise<number | undefined> {
  const sim = new Simulation(manifest, { seed, timings: { provisioning }, fastForward: true });
  let start = sim.clock.now();
  if (scenario !== 'bring-up') {
    if ((await sim.run(timeoutMs)).outcome !== 'Converged') return undefined;
    start = sim.clock.now();
    if (scenario === 'rollout' || scenario === 'wide-rollout') {
      await sim.apply({ ...manifest, spec: { ...manifest.spec, version: rolloutTarget(manifest.spec.version) } });
    } else {
      const victim = (await sim.store.listMachines(sim.cluster))[0];
      if (victim === undefined) return undefined;
      // A failed machine, not a crashed process: it never starts again, so it must be replaced.
      sim.world.neverStart(victim.name);
      sim.world.killMember(victim.name);
    }
  }
  const result = await sim.run(timeoutMs);
  return result.outcome === 'Converged' ? sim.clock.now() - start : undefined;
}

/** The manifest with its surge raised to the replica count: every replacement provisions at once. */
function widened(base: ControlPlane): ControlPlane {
  return { ...base, spec: { ...base.spec, rollout: { ...base.spec.rollout, maxSurge: base.spec.replicas } } };
}

export async function compareScenarios(options: ScenarioOptions): Promise<ScenarioComparison[]> {
  const timeoutMs = options.timeoutMs ?? 12 * 3_600_000;
  const comparisons: ScenarioComparison[] = [];
  for (const scenario of SCENARIOS) {
    const stats = {} as Record<Strategy, StrategyStats>;
    for (const strategy of ['serial', 'parallel'] as const) {
      const base = scenario === 'wide-rollout' && strategy === 'parallel' ? widened(options.base) : options.base;
      const manifest = manifestFor({ replicas: base.spec.replicas, base }, strategy);
      const samples: number[] = [];
      for (let index = 0; index < options.runs; index++) {
        const ms = await scenarioTime(scenario, manifest, options.provisioning, options.seed + index, timeoutMs);
        if (ms !== undefined) samples.push(ms);
      }
      stats[strategy] = statsOf(strategy, options.runs, samples);
    }
    comparisons.push({ scenario, description: describe(scenario, options.base), serial: stats.serial, parallel: stats.parallel, speedup: stats.serial.p50 / stats.parallel.p50 });
  }
  return comparisons;
}

import { setTimeout as sleep } from 'node:timers/promises';
import { EtcdAdminError, type EtcdAdmin } from '../ports/etcd-admin.ts';
import type { SnapshotSource } from '../domain/machine.ts';
import type { InfraProvider, MachineInfra } from '../ports/machine-provider.ts';
import { tokenForLowMemberId } from '../cluster/member-id.ts';
import { addRuleFor, type AddRule } from './critical-path-bound.ts';
import { kubernetesCalibration, kubernetesSample, type KubernetesCalibration, type KubernetesCalibrationWorld } from './kubernetes-calibration.ts';
import { seconds } from './stats.ts';

/**
 * What an init and a join cost on this host and etcd version, measured on a throwaway cluster before
 * the runs it is used to judge, by driving etcd directly at 20 ms resolution (no reconcile loop):
 *  - init: a 1-member cluster's process started to it answering with a leader (serving);
 *  - join: an idle learner added, started, caught up (applied within 10 of the leader) and promoted:
 *    AddLearner sent to PromoteLearner done. Each join grows the same cluster, so the add is retried
 *    while etcd's add rule refuses it, and the sample starts at the add that was accepted.
 * Every term is one cold sample (the first start on a fresh disk and page cache, listed apart) and
 * then WARM_SAMPLES warm ones; the bound takes the fastest of them all.
 */

export interface Calibration {
  version: string;
  /** The add rule the bound applies for this version (see critical-path-bound.ts). */
  addRule: AddRule;
  /** The warm samples of each term (the cold ones are under `coldSeconds`). */
  initSamplesSeconds: number[];
  joinSamplesSeconds: number[];
  /** With a keyspace: the warm catch-up and restore samples (empty when not measured). */
  catchUpSamplesSeconds: number[];
  restoreSamplesSeconds: number[];
  /** Each term's first sample, listed apart (it pays for a cold disk and page cache) but counted in the fastest. */
  coldSeconds: { init: number; join: number; catchUp: number | null; restore: number | null };
  /**
   * The fastest sample of each, cold or warm: the bound's init and join costs. A lower bound takes each cost at the
   * fastest this host has shown; a median would let a run with a quick first election beat its bound
   * (a new member's first election varies by up to a second).
   */
  initSeconds: number;
  joinSeconds: number;
  /**
   * With a keyspace: the bytes written, and the fastest join (cold or warm) of a learner that had them to catch
   * up (add to promoted; each such learner is removed again, so every sample joins a 1-voter cluster);
   * null without a keyspace, or when no learner was in sync within 90 s.
   */
  keyspaceBytes: number | null;
  catchUpSeconds: number | null;
  /**
   * With a keyspace brought up by restore: a 1-member cluster started from the keyspace's snapshot,
   * its copy to the machine's host included (over the host's own link on the lab), process started to
   * serving: the fastest sample (cold or warm) is the bound's init for those runs; null otherwise.
   */
  restoreSeconds: number | null;
  /**
   * With a keyspace: the leader streaming its whole database to `streams` readers at once (etcd's
   * snapshot call), read from fastplane's side of the lab, so through the leader's own link: what it
   * can send in all. On the lab with both directions limited, that is its uplink's rate.
   */
  leaderOutbound: { streams: number; bytesPerStream: number; seconds: number; bytesPerSecond: number } | null;
  /**
   * With the Kubernetes control plane (`bench --kubernetes`; absent in older results and etcd-only
   * benches): on a machine whose member votes, kube-apiserver started to `/readyz` ok (`apiserver`),
   * and controller-manager and scheduler started to both healthy (`controllers`); one cold sample,
   * the warm ones, and the fastest of all, the bound's terms; and the CPU each step spent, the least
   * of all, the shared-CPU term's work (kubernetes-calibration.ts).
   */
  kubernetes?: KubernetesCalibration;
}

export interface CalibrationWorld {
  provider: InfraProvider;
  admin: EtcdAdmin;
  /** Provider cluster holding every calibration machine; created with no provisioning delay. */
  cluster: string;
  version: string;
  /** false: members start with --strict-reconfig-check=false (etcd's add/remove checks off). */
  strictReconfigCheck?: boolean;
  /**
   * The runs' keyspace: written into a fresh 1-member cluster, whose database is then streamed to
   * `streams` readers at once (`streamDatabase` resolves with the bytes), before one more join is timed.
   */
  keyspace?: {
    bytes: number;
    write: (endpoints: string[]) => Promise<unknown>;
    streams: number;
    streamDatabase: (endpoint: string) => Promise<number>;
    /** When the runs restore the keyspace: saves it as a snapshot where every machine can restore it. */
    save?: (endpoint: string) => Promise<SnapshotSource>;
  };
  /** With the Kubernetes control plane: its components are timed on a 1-member cluster of their own, last. */
  kubernetes?: Omit<KubernetesCalibrationWorld, 'cluster'>;
}

const POLL_MS = 20;
/** Warm samples per term, after the cold one. */
export const WARM_SAMPLES = 5;
/** Machines the calibration holds at once: the kept init and its cold and warm joins. */
export const CALIBRATION_PEAK_MACHINES = WARM_SAMPLES + 2;
/** The cluster token of the 1-member cluster initialised on machine `ordinal`. */
export const initToken = (ordinal: number): string => `calibration-${String(ordinal)}`;
const WAIT_MS = 60_000;
/**
 * A learner with a keyspace to catch up can answer nothing for minutes (etcd's publish spin, see
 * docs/etcd-behaviour.md); past this the sample is given up and the bound keeps the idle join.
 */
const CATCH_UP_WAIT_MS = 90_000;
const IN_SYNC_ENTRIES = 10;
/** Answers that mean "not yet": the add rule, a learner not in sync, a member still starting. */
const NOT_YET = new Set(['UnhealthyCluster', 'NotEnoughStartedMembers', 'NotInSync', 'Unreachable', 'Timeout', 'LearnerRpc']);

class CalibrationTimeout extends Error {}

async function until<T>(what: string, probe: () => Promise<T | undefined>, waitMs = WAIT_MS): Promise<T> {
  const deadline = Date.now() + waitMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (error) {
      if (!(error instanceof EtcdAdminError && NOT_YET.has(error.kind))) throw error;
      last = error;
    }
    if (Date.now() > deadline) throw new CalibrationTimeout(`calibration: timed out waiting for ${what}`, { cause: last });
    await sleep(POLL_MS);
  }
}

const machineName = (ordinal: number): string => `calibration-${String(ordinal)}`;

/** A new machine, provisioned (the calibration cluster has no provisioning delay). */
export async function machine(world: CalibrationWorld, ordinal: number): Promise<MachineInfra> {
  const name = machineName(ordinal);
  await world.provider.create({ cluster: world.cluster, name, ordinal });
  return until(`${name} provisioned`, async () => {
    const infra = await world.provider.describe(world.cluster, name);
    return infra?.state === 'Provisioned' ? infra : undefined;
  });
}

/**
 * Starts a 1-member cluster on a new machine, from `restoreFrom` when given; returns it and how long
 * until it served.
 */
export async function initSample(world: CalibrationWorld, ordinal: number, restoreFrom?: SnapshotSource): Promise<{ infra: MachineInfra; seconds: number }> {
  const infra = await machine(world, ordinal);
  const started = Date.now();
  await world.provider.startMember(world.cluster, infra.name, {
    memberName: infra.name,
    version: world.version,
    initialCluster: `${infra.name}=${infra.peerURL}`,
    initialClusterState: 'new',
    clusterToken: tokenForLowMemberId(initToken(ordinal), [infra.peerURL]),
    maxLearners: 1,
    ...(world.strictReconfigCheck === false ? { strictReconfigCheck: false } : {}),
    ...(restoreFrom === undefined ? {} : { restoreFrom }),
  });
  await until(`${infra.name} serving`, async () => ((await world.admin.status(infra.clientURL)).leaderId !== '0' ? true : undefined));
  return { infra, seconds: seconds(Date.now() - started) };
}

/**
 * Adds (retrying while etcd's rule refuses), starts, waits in sync and promotes a learner on a new
 * machine; returns AddLearner accepted to promoted. `token` is the leader's cluster token. `leave`:
 * the member is removed and its machine deleted once timed, so the next sample joins the same cluster.
 */
export async function joinSample(world: CalibrationWorld, ordinal: number, leader: MachineInfra, token: string, waitMs = WAIT_MS, leave = false): Promise<number> {
  const infra = await machine(world, ordinal);
  let started = 0;
  const { member, members } = await until('the learner add accepted', async () => {
    started = Date.now();
    return world.admin.addLearner([leader.clientURL], infra.peerURL);
  });
  const initialCluster = members.map((m) => `${m.id === member.id ? infra.name : m.name}=${m.peerURLs[0] ?? ''}`).join(',');
  await world.provider.startMember(world.cluster, infra.name, {
    memberName: infra.name,
    version: world.version,
    initialCluster,
    initialClusterState: 'existing',
    clusterToken: token,
    maxLearners: 1,
    ...(world.strictReconfigCheck === false ? { strictReconfigCheck: false } : {}),
  });
  const gone = async (): Promise<void> => {
    await until('the member removed', async () => {
      await world.admin.removeMember([leader.clientURL], member.id);
      return true;
    });
    await world.provider.delete(world.cluster, infra.name);
  };
  try {
    await until(
      'the learner in sync',
      async () => {
        const [mine, lead] = await Promise.all([world.admin.status(infra.clientURL), world.admin.status(leader.clientURL)]);
        return mine.raftAppliedIndex >= lead.raftAppliedIndex - IN_SYNC_ENTRIES ? true : undefined;
      },
      waitMs,
    );
    await until('the promotion', async () => {
      await world.admin.promoteLearner([leader.clientURL], member.id);
      return true;
    });
  } catch (error) {
    // A sample given up still leaves: its learner would take the one learner slot of the next sample.
    if (leave) await gone();
    throw error;
  }
  const took = seconds(Date.now() - started);
  if (leave) await gone();
  return took;
}

/**
 * One cold sample, then WARM_SAMPLES warm ones; `sample(i)` gets 0 for the cold one. A sample that gave
 * up (null) ends the sampling: the next would only wait out the same patience again.
 */
export async function sampled<T>(sample: (i: number) => Promise<T>): Promise<{ cold: T; warm: T[] }> {
  const cold = await sample(0);
  const warm: T[] = [];
  for (let i = 1; i <= WARM_SAMPLES && cold !== null && warm.at(-1) !== null; i++) warm.push(await sample(i));
  return { cold, warm };
}

const fastest = (values: (number | null)[]): number | null => {
  const known = values.filter((v): v is number => v !== null);
  return known.length === 0 ? null : Math.min(...known);
};

/** The leader's database streamed to several readers at once: bytes in all over the time the last took. */
async function outboundRate(keyspace: NonNullable<CalibrationWorld['keyspace']>, endpoint: string): Promise<NonNullable<Calibration['leaderOutbound']>> {
  const started = Date.now();
  const sizes = await Promise.all(Array.from({ length: keyspace.streams }, () => keyspace.streamDatabase(endpoint)));
  const elapsed = Math.max(1, Date.now() - started) / 1000;
  const total = sizes.reduce((a, b) => a + b, 0);
  return { streams: keyspace.streams, bytesPerStream: Math.max(...sizes), seconds: seconds(elapsed * 1000), bytesPerSecond: Math.round(total / elapsed) };
}

/**
 * Inits (the last one kept as the leader), then joins into its cluster; with a keyspace, a cluster of
 * its own for the outbound rate, the restores and the catch-ups. Every machine is deleted by the end
 * except the last leader; the caller destroys the provider cluster.
 */
export async function calibrate(world: CalibrationWorld): Promise<Calibration> {
  const held: MachineInfra[] = [];
  const inits = await sampled(async (i) => {
    const sample = await initSample(world, i + 1);
    const last = held.pop();
    if (last !== undefined) await world.provider.delete(world.cluster, last.name);
    held.push(sample.infra);
    return sample.seconds;
  });
  const leader = held[0];
  if (leader === undefined) throw new Error('calibration kept no leader');
  let ordinal = WARM_SAMPLES + 1;
  const joins = await sampled(() => joinSample(world, ++ordinal, leader, initToken(WARM_SAMPLES + 1)));
  let catchUps: { cold: number | null; warm: (number | null)[] } | null = null;
  let restores: { cold: number; warm: number[] } | null = null;
  let leaderOutbound: Calibration['leaderOutbound'] = null;
  const keyspace = world.keyspace;
  if (keyspace !== undefined) {
    // The joined cluster is done with: its machines go, so the lab's hosts are free for the rest.
    for (let o = WARM_SAMPLES + 1; o <= ordinal; o++) await world.provider.delete(world.cluster, machineName(o));
    // A cluster of its own, so the keyspace is written to one member only, as in the runs.
    const written = await initSample(world, ++ordinal);
    let keyLeader = { infra: written.infra, token: initToken(ordinal) };
    await keyspace.write([written.infra.clientURL]);
    leaderOutbound = await outboundRate(keyspace, written.infra.clientURL);
    if (keyspace.save !== undefined) {
      // The catch-ups are timed into the cluster the runs' learners join: one restored from the snapshot.
      const snapshot = await keyspace.save(written.infra.clientURL);
      await world.provider.delete(world.cluster, written.infra.name);
      let kept: MachineInfra | undefined;
      restores = await sampled(async () => {
        if (kept !== undefined) await world.provider.delete(world.cluster, kept.name);
        const restored = await initSample(world, ++ordinal, snapshot);
        kept = restored.infra;
        keyLeader = { infra: restored.infra, token: initToken(ordinal) };
        return restored.seconds;
      });
    }
    const into = keyLeader;
    catchUps = await sampled(() =>
      joinSample(world, ++ordinal, into.infra, into.token, CATCH_UP_WAIT_MS, true).catch((error: unknown) => {
        if (error instanceof CalibrationTimeout) return null;
        throw error;
      }),
    );
  }
  let kubernetes: Calibration['kubernetes'];
  if (world.kubernetes !== undefined) {
    // Its own 1-member cluster, so the apiserver writes through a member that votes alone, as the
    // init machine's does, and the joins above were timed without its objects to catch up.
    const voter = await initSample(world, ++ordinal);
    const on = { ...world.kubernetes, cluster: world.cluster };
    const starts = await sampled(() => kubernetesSample(on, voter.infra.name));
    kubernetes = kubernetesCalibration(world.kubernetes.launch.version, starts);
  }
  return {
    ...(kubernetes === undefined ? {} : { kubernetes }),
    version: world.version,
    addRule: addRuleFor(world.version),
    initSamplesSeconds: inits.warm,
    joinSamplesSeconds: joins.warm,
    catchUpSamplesSeconds: (catchUps?.warm ?? []).filter((v): v is number => v !== null),
    restoreSamplesSeconds: restores?.warm ?? [],
    coldSeconds: { init: inits.cold, join: joins.cold, catchUp: catchUps?.cold ?? null, restore: restores?.cold ?? null },
    // The fastest of every sample, the cold one too: a floor may use any cost this host has shown, and
    // a cold sample is not always the slowest (a catch-up's first publish may not wait its timeout).
    initSeconds: Math.min(inits.cold, ...inits.warm),
    joinSeconds: Math.min(joins.cold, ...joins.warm),
    keyspaceBytes: keyspace?.bytes ?? null,
    catchUpSeconds: catchUps === null ? null : fastest([catchUps.cold, ...catchUps.warm]),
    restoreSeconds: restores === null ? null : fastest([restores.cold, ...restores.warm]),
    leaderOutbound,
  };
}

import { setTimeout as sleep } from 'node:timers/promises';
import { EtcdAdminError, type EtcdAdmin } from '../ports/etcd-admin.ts';
import type { SnapshotSource } from '../domain/machine.ts';
import type { InfraProvider, MachineInfra } from '../ports/machine-provider.ts';
import { tokenForLowMemberId } from '../cluster/member-id.ts';
import { addRuleFor, type AddRule } from './critical-path-bound.ts';
import { seconds } from './stats.ts';

/**
 * What an init and a join cost on this host and etcd version, measured on a throwaway cluster before
 * the runs it is used to judge, by driving etcd directly at 20 ms resolution (no reconcile loop):
 *  - init: a 1-member cluster's process started to it answering with a leader (serving);
 *  - join: an idle learner added, started, caught up (applied within 10 of the leader) and promoted:
 *    AddLearner sent to PromoteLearner done. Each join grows the same cluster, so the add is retried
 *    while etcd's add rule refuses it, and the sample starts at the add that was accepted.
 */

export interface Calibration {
  version: string;
  /** The add rule the bound applies for this version (see critical-path-bound.ts). */
  addRule: AddRule;
  initSamplesSeconds: number[];
  joinSamplesSeconds: number[];
  /**
   * The fastest sample of each: the bound's init and join costs. A lower bound takes each cost at the
   * fastest this host has shown; a median would let a run with a quick first election beat its bound
   * (a new member's first election varies by up to a second).
   */
  initSeconds: number;
  joinSeconds: number;
  /**
   * With a keyspace: the bytes written, and one learner's join that had them to catch up (add to
   * promoted); null without a keyspace, or when that learner was not in sync within 90 s.
   */
  keyspaceBytes: number | null;
  catchUpSeconds: number | null;
  /**
   * With a keyspace brought up by restore: a 1-member cluster started from the keyspace's snapshot,
   * process started (the restore first) to serving: the bound's init for those runs; null otherwise.
   */
  restoreSeconds: number | null;
  /**
   * With a keyspace: the leader streaming its whole database to `streams` readers at once over links
   * with no limit (etcd's snapshot call): what it can send in all, whatever the learners' links.
   */
  leaderOutbound: { streams: number; bytesPerStream: number; seconds: number; bytesPerSecond: number } | null;
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
}

const POLL_MS = 20;
const SAMPLES = 5;
/** Machines the calibration holds at once: the kept init, its joins, and the keyspace cluster's two. */
export const CALIBRATION_PEAK_MACHINES = SAMPLES + 3;
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

/** A new machine, provisioned (the calibration cluster has no provisioning delay). */
export async function machine(world: CalibrationWorld, ordinal: number): Promise<MachineInfra> {
  const name = `calibration-${String(ordinal)}`;
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
 * machine; returns AddLearner accepted to promoted. `token` is the leader's cluster token.
 */
export async function joinSample(world: CalibrationWorld, ordinal: number, leader: MachineInfra, token: string, waitMs = WAIT_MS): Promise<number> {
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
  return seconds(Date.now() - started);
}

/** The leader's database streamed to several readers at once: bytes in all over the time the last took. */
async function outboundRate(keyspace: NonNullable<CalibrationWorld['keyspace']>, endpoint: string): Promise<NonNullable<Calibration['leaderOutbound']>> {
  const started = Date.now();
  const sizes = await Promise.all(Array.from({ length: keyspace.streams }, () => keyspace.streamDatabase(endpoint)));
  const elapsed = Math.max(1, Date.now() - started) / 1000;
  const total = sizes.reduce((a, b) => a + b, 0);
  return { streams: keyspace.streams, bytesPerStream: Math.max(...sizes), seconds: seconds(elapsed * 1000), bytesPerSecond: Math.round(total / elapsed) };
}

/** `samples` inits (the last one kept as the leader), then `samples` joins into its cluster. */
export async function calibrate(world: CalibrationWorld, samples = SAMPLES): Promise<Calibration> {
  const inits: number[] = [];
  let leader: MachineInfra | undefined;
  for (let i = 1; i <= samples; i++) {
    const sample = await initSample(world, i);
    inits.push(sample.seconds);
    if (i < samples) await world.provider.delete(world.cluster, sample.infra.name);
    else leader = sample.infra;
  }
  if (leader === undefined) throw new Error('calibration needs at least one sample');
  const joins: number[] = [];
  for (let i = 1; i <= samples; i++) joins.push(await joinSample(world, samples + i, leader, initToken(samples)));
  let catchUpSeconds: number | null = null;
  let leaderOutbound: Calibration['leaderOutbound'] = null;
  let restoreSeconds: number | null = null;
  if (world.keyspace !== undefined) {
    // A cluster of its own, so the keyspace is written to one member only, as in the runs.
    const ordinal = 2 * samples + 1;
    const { infra } = await initSample(world, ordinal);
    await world.keyspace.write([infra.clientURL]);
    leaderOutbound = await outboundRate(world.keyspace, infra.clientURL);
    // The catch-up is timed into the cluster the runs' learners join: the written one, or one restored
    // from its snapshot (on the host the written one had, so the calibration's peak stays the same).
    let leader = { infra, token: initToken(ordinal) };
    if (world.keyspace.save !== undefined) {
      const snapshot = await world.keyspace.save(infra.clientURL);
      await world.provider.delete(world.cluster, infra.name);
      const restored = await initSample(world, ordinal + 2, snapshot);
      restoreSeconds = restored.seconds;
      leader = { infra: restored.infra, token: initToken(ordinal + 2) };
    }
    catchUpSeconds = await joinSample(world, ordinal + 1, leader.infra, leader.token, CATCH_UP_WAIT_MS).catch((error: unknown) => {
      if (error instanceof CalibrationTimeout) return null;
      throw error;
    });
  }
  return {
    version: world.version,
    addRule: addRuleFor(world.version),
    initSamplesSeconds: inits,
    joinSamplesSeconds: joins,
    initSeconds: Math.min(...inits),
    joinSeconds: Math.min(...joins),
    keyspaceBytes: world.keyspace?.bytes ?? null,
    catchUpSeconds,
    restoreSeconds,
    leaderOutbound,
  };
}

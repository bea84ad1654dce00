import type { MachineInfra } from '../ports/machine-provider.ts';
import type { EtcdAlarm, EtcdErrorKind } from '../ports/etcd-admin.ts';
import { EtcdAdminError } from '../ports/etcd-admin.ts';

/** Machine ordinals per cluster, as on the local provider (`prefix.slot.ordinal`). */
export const MAX_ORDINAL = 254;

export interface ModelMachine {
  /** The provider cluster (fastplane's cluster name) the machine belongs to. */
  cluster: string;
  name: string;
  address: string;
  clientURL: string;
  peerURL: string;
  readyAt: number;
  failProvisioning: boolean;
  neverStarts: boolean;
  running: boolean;
  version: string;
  startedAt?: number;
  deleteAt?: number;
  /** The etcd cluster and member whose data this machine's disk holds (set once its member ran). */
  dataClusterId?: string;
  dataMemberId?: string;
}

export interface ModelMember {
  id: string;
  /** The --name the member started with; published (visible in member lists) from publishedAt on. */
  name: string;
  peerURL: string;
  clientURL?: string;
  isLearner: boolean;
  /** When the leader's connection to it started (for the 5 s rule); undefined while not running. */
  connectedSince?: number;
  caughtUpAt: number;
  publishedAt?: number;
  stalledAtIndex?: number;
  /** A follower that has not heard of the new leader yet: its status names `leaderId` until `until`. */
  staleLeader?: { leaderId: string; until: number };
  /** Started with --strict-reconfig-check=false: as the serving member it skips the add/remove health checks. */
  unchecked?: boolean;
  /** Its own --max-learners, from its start on: each member checks a learner add against its own. */
  maxLearners?: number;
}

/**
 * One etcd cluster. Real etcd identifies a cluster by its bootstrap (token and initial members), not
 * by the infrastructure it runs on: every `--initial-cluster-state new` start on an empty data dir
 * creates a new one, and a member started with `existing` joins the cluster its listed peers belong to.
 */
export interface ModelCluster {
  id: string;
  /** The provider cluster whose machine bootstrapped it. */
  owner: string;
  token: string;
  members: Map<string, ModelMember>;
  leaderId: string | undefined;
  /** No leader until this time (election in progress). */
  electionUntil: number;
  /** When leaderId took over (it leads from max(leaderSince, electionUntil) on). */
  leaderSince: number;
  /** When the last leader stopped leading (undefined: never led, or led since its bootstrap). */
  leaderLostAt?: number;
  baseIndex: number;
  createdAt: number;
  alarms: EtcdAlarm[];
  /** Peer URL -> when its member was removed (a re-add in the same second re-creates the removed ID). */
  removedPeerURLs: Map<string, number>;
}

/** Unsafe changes the model saw applied: the oracle for invariants 1, 3, 4, 5 and 6. */
export interface ModelViolation {
  at: number;
  rule: string;
  detail: string;
}

/** The truth about one fastplane cluster, for invariant and convergence checks. */
export interface ModelClusterSnapshot {
  clusterId?: string;
  leaderId?: string;
  members: { id: string; peerURL: string; isLearner: boolean; running: boolean; stalled: boolean; machine?: string }[];
  /** Machines not deleted yet (including ones being deleted). */
  machines: { name: string; state: MachineInfra['state']; running: boolean; started: boolean; version: string; memberId?: string }[];
}

/**
 * etcd's refusal, as a client would receive it. Refusals are the model's bread and butter (every poll
 * during the 5 s rule or a catch-up gets one) and come from a remote server, so no stack is captured:
 * it would cost more than the rest of the call and show nothing.
 */
export function fail(kind: EtcdErrorKind, message: string): never {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  const error = new EtcdAdminError(kind, message);
  Error.stackTraceLimit = limit;
  throw error;
}

export const peerURLOf = (machine: ModelMachine): string => machine.peerURL;
export const clientURLOf = (machine: ModelMachine): string => machine.clientURL;

/** `--initial-cluster` entries (`name=url,...`). */
export function parseInitialCluster(text: string): { name: string; url: string }[] {
  return text
    .split(',')
    .filter((entry) => entry !== '')
    .map((entry) => {
      const eq = entry.indexOf('=');
      return { name: entry.slice(0, eq), url: entry.slice(eq + 1) };
    });
}


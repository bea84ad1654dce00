import { readFileSync } from 'node:fs';
import { AlarmAction, AlarmType, Etcd3, type IMember, type IOptions } from 'etcd3';
import { noop } from 'cockatiel';
import {
  EtcdAdminError,
  type EtcdAdmin,
  type EtcdAlarm,
  type EtcdErrorKind,
  type EtcdMember,
  type EtcdMemberStatus,
  type TlsFiles,
} from '../../ports/etcd-admin.ts';

/**
 * EtcdAdmin over the `etcd3` npm package. One client per endpoint: the package shuffles hosts per
 * call, and per-member RPCs (status, moveLeader) must reach one member. Its default fault handling
 * is off: it retries "unhealthy cluster" and learner refusals, then opens a circuit breaker that
 * fails every call on that host for 5 s. Every call carries a deadline, none is retried here.
 */

/** etcd's refusals by message text; the first match wins ("in sync" before "can only promote"). */
const MESSAGE_KINDS: readonly (readonly [string, EtcdErrorKind])[] = [
  ['in sync with leader', 'NotInSync'],
  ['can only promote a learner member', 'NotALearner'],
  ['too many learner members', 'TooManyLearners'],
  ['unhealthy cluster', 'UnhealthyCluster'],
  ['not enough started members', 'NotEnoughStartedMembers'],
  ['member not found', 'MemberNotFound'],
  ['peer urls already exists', 'PeerURLExists'],
  ['not leader', 'NotLeader'],
  ['bad leader transferee', 'BadLeaderTransferee'],
  ['rpc not supported for learner', 'LearnerRpc'],
  ['server stopped', 'ServerStopped'],
  // The server gave up waiting for its own proposal: the change may still be applied.
  ['request timed out', 'Timeout'],
  ['deadline exceeded', 'Timeout'],
  ['econnrefused', 'Unreachable'],
  ['no connection established', 'Unreachable'],
];

/** Maps anything thrown by etcd3 (or grpc-js) to an EtcdAdminError, keeping the original text. */
export function classifyEtcdError(error: unknown): EtcdAdminError {
  if (error instanceof EtcdAdminError) return error;
  const message = error instanceof Error ? error.message : String(error);
  const text = message.toLowerCase();
  const kind =
    MESSAGE_KINDS.find(([needle]) => text.includes(needle))?.[1] ??
    // An UNAVAILABLE without etcd's text is the transport failing: no answer came from etcd.
    (text.startsWith('14 unavailable') && !text.includes('etcdserver:') ? 'Unreachable' : 'Unknown');
  return new EtcdAdminError(kind, message);
}

/** A client certificate and the CA to trust, as the etcd3 package takes them. */
export type TlsCredentials = NonNullable<IOptions['credentials']>;

/** Reads TLS credentials from PEM files. */
export function readTlsCredentials(files: TlsFiles): TlsCredentials {
  return { rootCertificate: readFileSync(files.caFile), certChain: readFileSync(files.certFile), privateKey: readFileSync(files.keyFile) };
}

export interface Etcd3AdminOptions {
  /** Deadline of every call but status, in ms (default 3000). */
  callTimeoutMs?: number;
  /** Deadline of status, in ms (default 1000): observing many members must stay quick. */
  statusTimeoutMs?: number;
  /**
   * The client credentials of a TLS cluster; without them, plain http. Asked for when a connection
   * opens: a new cluster's certificates exist only once its first machine does.
   */
  credentials?: () => TlsCredentials;
}

/**
 * Whether a failed membership change provably did nothing, so the next endpoint may be tried: the
 * connection was never made, or a learner refused the RPC. A connection dropped mid-call proves nothing.
 */
function provablyNotExecuted(error: EtcdAdminError): boolean {
  if (error.kind === 'LearnerRpc') return true;
  const text = error.message.toLowerCase();
  return error.kind === 'Unreachable' && (text.includes('econnrefused') || text.includes('no connection established'));
}

function toMember(member: IMember): EtcdMember {
  return {
    id: member.ID,
    name: member.name,
    peerURLs: [...member.peerURLs],
    clientURLs: [...member.clientURLs],
    isLearner: member.isLearner,
  };
}

function alarmKind(alarm: keyof typeof AlarmType): EtcdAlarm['alarm'] | undefined {
  switch (alarm) {
    case 'Nospace':
      return 'NOSPACE';
    case 'Corrupt':
      return 'CORRUPT';
    case 'None':
      return undefined;
  }
}

/** One error for a call that failed on every endpoint, naming each endpoint's failure. */
function allFailed(call: string, failures: { endpoint: string; error: EtcdAdminError }[]): EtcdAdminError {
  if (failures.length === 0) return new EtcdAdminError('Unreachable', `${call}: no endpoints given`);
  const kind = failures.find((failure) => failure.error.kind !== 'Unreachable')?.error.kind ?? 'Unreachable';
  const detail = failures.map((failure) => `${failure.endpoint}: ${failure.error.message}`).join('; ');
  return new EtcdAdminError(kind, `${call} failed on every endpoint (${detail})`);
}

export class Etcd3Admin implements EtcdAdmin {
  private readonly clients = new Map<string, Etcd3>();
  private readonly callTimeoutMs: number;
  private readonly statusTimeoutMs: number;
  private readonly credentials: (() => TlsCredentials) | undefined;

  constructor(options: Etcd3AdminOptions = {}) {
    this.callTimeoutMs = options.callTimeoutMs ?? 3000;
    this.statusTimeoutMs = options.statusTimeoutMs ?? 1000;
    this.credentials = options.credentials;
  }

  private client(endpoint: string): Etcd3 {
    let client = this.clients.get(endpoint);
    if (!client) {
      client = new Etcd3(clientOptions([endpoint], { callTimeoutMs: this.callTimeoutMs, credentials: this.credentials?.() }));
      this.clients.set(endpoint, client);
    }
    return client;
  }

  /**
   * A channel that could not reach its endpoint waits out gRPC's reconnect backoff (up to minutes)
   * before it tries again, and a new member at the same address (a replacement reusing an ordinal)
   * would answer nothing until then: such a client is dropped, and the next call connects afresh.
   */
  private dropIfUnreachable(endpoint: string, error: EtcdAdminError): EtcdAdminError {
    const client = this.clients.get(endpoint);
    if (client && (error.kind === 'Unreachable' || /waiting for lb pick/i.test(error.message))) {
      this.clients.delete(endpoint);
      client.close();
    }
    return error;
  }

  /** Reads: any failure moves on to the next endpoint. */
  private firstAnswer<T>(call: string, endpoints: readonly string[], run: (client: Etcd3) => Promise<T>): Promise<T> {
    return this.tryInTurn(call, endpoints, run, () => true);
  }

  /**
   * Membership changes: only a refusal that proves nothing happened moves on to the next endpoint.
   * A timeout or any etcd refusal is thrown at once, for the caller to re-observe.
   */
  private change<T>(call: string, endpoints: readonly string[], run: (client: Etcd3) => Promise<T>): Promise<T> {
    return this.tryInTurn(call, endpoints, run, provablyNotExecuted);
  }

  /** Tries the endpoints in order; a failure moves on only when `moveOn` allows it. */
  private async tryInTurn<T>(
    call: string,
    endpoints: readonly string[],
    run: (client: Etcd3) => Promise<T>,
    moveOn: (error: EtcdAdminError) => boolean,
  ): Promise<T> {
    const failures: { endpoint: string; error: EtcdAdminError }[] = [];
    for (const endpoint of endpoints) {
      try {
        return await run(this.client(endpoint));
      } catch (error) {
        const classified = this.dropIfUnreachable(endpoint, classifyEtcdError(error));
        if (!moveOn(classified)) throw classified;
        failures.push({ endpoint, error: classified });
      }
    }
    throw allFailed(call, failures);
  }

  async memberList(endpoints: readonly string[], options?: { linearizable: boolean }): Promise<EtcdMember[]> {
    const linearizable = options?.linearizable ?? true;
    const response = await this.firstAnswer('memberList', endpoints, (client) => client.cluster.memberList({ linearizable }));
    return response.members.map(toMember);
  }

  async addLearner(endpoints: readonly string[], peerURL: string): Promise<{ member: EtcdMember; members: EtcdMember[] }> {
    const response = await this.change('addLearner', endpoints, (client) =>
      client.cluster.memberAdd({ peerURLs: [peerURL], isLearner: true }),
    );
    return { member: toMember(response.member), members: response.members.map(toMember) };
  }

  async promoteLearner(endpoints: readonly string[], memberId: string): Promise<void> {
    await this.change('promoteLearner', endpoints, (client) => client.cluster.memberPromote({ ID: memberId }));
  }

  async removeMember(endpoints: readonly string[], memberId: string): Promise<void> {
    await this.change('removeMember', endpoints, (client) => client.cluster.memberRemove({ ID: memberId }));
  }

  async moveLeader(leaderEndpoint: string, targetMemberId: string): Promise<void> {
    try {
      await this.client(leaderEndpoint).maintenance.moveLeader({ targetID: targetMemberId });
    } catch (error) {
      throw classifyEtcdError(error);
    }
  }

  async status(endpoint: string, options: { timeoutMs?: number } = {}): Promise<EtcdMemberStatus> {
    try {
      const response = await this.client(endpoint).maintenance.status({ deadline: Date.now() + Math.min(options.timeoutMs ?? this.statusTimeoutMs, this.statusTimeoutMs) });
      return {
        memberId: response.header.member_id,
        leaderId: response.leader === '' ? '0' : response.leader,
        raftIndex: Number(response.raftIndex),
        raftAppliedIndex: Number(response.raftAppliedIndex),
        raftTerm: Number(response.raftTerm),
        isLearner: response.isLearner,
        version: response.version,
        dbSize: Number(response.dbSize),
        errors: [...response.errors],
      };
    } catch (error) {
      throw this.dropIfUnreachable(endpoint, classifyEtcdError(error));
    }
  }

  async alarms(endpoints: readonly string[]): Promise<EtcdAlarm[]> {
    const response = await this.firstAnswer('alarms', endpoints, (client) =>
      client.maintenance.alarm({ action: AlarmAction.Get, memberID: '0', alarm: AlarmType.None }),
    );
    return response.alarms.flatMap((alarm) => {
      const kind = alarmKind(alarm.alarm);
      return kind === undefined ? [] : [{ memberId: alarm.memberID, alarm: kind }];
    });
  }

  close(): Promise<void> {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
    return Promise.resolve();
  }
}

export interface KvClientOptions {
  /** Deadline of every call, in ms (default 3000). */
  callTimeoutMs?: number;
  /** Client credentials of a TLS cluster; without them, plain http. */
  credentials?: TlsCredentials | undefined;
}

function clientOptions(hosts: string[], { callTimeoutMs = 3000, credentials }: KvClientOptions): IOptions {
  return {
    hosts,
    ...(credentials === undefined ? {} : { credentials }),
    faultHandling: { global: noop, host: () => noop },
    // grpc-js backs off reconnects up to minutes; a member that was down when first asked (a learner
    // still starting) would then look unreachable for seconds after it came up.
    grpcOptions: { 'grpc.initial_reconnect_backoff_ms': 100, 'grpc.max_reconnect_backoff_ms': 1000 },
    // A factory, so that each call gets its own deadline.
    defaultCallOptions: () => ({ deadline: Date.now() + callTimeoutMs }),
  };
}

/** A plain key-value client (tests write and read keys); the same no-retry policy and deadline. */
export function openKvClient(endpoints: readonly string[], options: KvClientOptions = {}): Etcd3 {
  return new Etcd3(clientOptions([...endpoints], options));
}

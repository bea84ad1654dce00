/**
 * What fastplane needs from etcd's Cluster and Maintenance APIs. Member IDs are decimal strings
 * (uint64 does not fit a JS number). Every call has a deadline and none is retried: after a timeout
 * the caller re-observes before trying again, because a membership change may have happened anyway.
 */
export interface EtcdMember {
  id: string;
  /** Empty until the member has started and published itself. */
  name: string;
  peerURLs: string[];
  /** Empty until the member has started. */
  clientURLs: string[];
  isLearner: boolean;
}

export interface EtcdMemberStatus {
  memberId: string;
  /** "0" when the member knows no leader. */
  leaderId: string;
  raftIndex: number;
  raftAppliedIndex: number;
  raftTerm: number;
  isLearner: boolean;
  version: string;
  dbSize: number;
  errors: string[];
}

/** A TLS cluster's client credentials as PEM files: what `etcdctl --cacert --cert --key` takes. */
export interface TlsFiles {
  caFile: string;
  certFile: string;
  keyFile: string;
}

export type EtcdAlarmKind = 'NOSPACE' | 'CORRUPT';

export interface EtcdAlarm {
  memberId: string;
  alarm: EtcdAlarmKind;
}

/** etcd's refusals, recognised by message text at the adapter edge. */
export type EtcdErrorKind =
  | 'NotInSync'
  | 'NotALearner'
  | 'TooManyLearners'
  | 'UnhealthyCluster'
  | 'NotEnoughStartedMembers'
  | 'MemberNotFound'
  | 'PeerURLExists'
  | 'NotLeader'
  | 'BadLeaderTransferee'
  | 'LearnerRpc'
  | 'ServerStopped'
  | 'Timeout'
  | 'Unreachable'
  | 'Unknown';

export class EtcdAdminError extends Error {
  override readonly name = 'EtcdAdminError';
  constructor(
    readonly kind: EtcdErrorKind,
    message: string,
  ) {
    super(message);
  }
}

export interface EtcdAdmin {
  /** Asks the endpoints in order until one answers. Linearizable unless told otherwise. */
  memberList(endpoints: readonly string[], options?: { linearizable: boolean }): Promise<EtcdMember[]>;
  /** Adds a learner; returns the new member and the membership right after the add. */
  addLearner(endpoints: readonly string[], peerURL: string): Promise<{ member: EtcdMember; members: EtcdMember[] }>;
  promoteLearner(endpoints: readonly string[], memberId: string): Promise<void>;
  removeMember(endpoints: readonly string[], memberId: string): Promise<void>;
  /** Must be sent to the leader's own endpoint. */
  moveLeader(leaderEndpoint: string, targetMemberId: string): Promise<void>;
  /** Status of the member behind this one endpoint; `timeoutMs` shortens the adapter's own deadline. */
  status(endpoint: string, options?: { timeoutMs?: number }): Promise<EtcdMemberStatus>;
  alarms(endpoints: readonly string[]): Promise<EtcdAlarm[]>;
  close(): Promise<void>;
}

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { BrokenCircuitError } from 'cockatiel';
import { GRPCDeadlineExceededError, GRPCFailedPreconditionError, GRPCNotFoundError, GRPCUnavailableError } from 'etcd3';
import { classifyEtcdError } from '../../src/adapters/etcd/etcd3-admin.ts';
import { EtcdAdminError, type EtcdErrorKind } from '../../src/ports/etcd-admin.ts';

// Messages exactly as etcd3@1.1.2 reports them against etcd 3.4.23 / 3.5.16 (docs/etcd-behaviour.md, "How the error texts are used").
const CASES: readonly (readonly [Error, EtcdErrorKind])[] = [
  [new GRPCFailedPreconditionError('9 FAILED_PRECONDITION: etcdserver: too many learner members in cluster'), 'TooManyLearners'],
  [
    new GRPCFailedPreconditionError('9 FAILED_PRECONDITION: etcdserver: can only promote a learner member which is in sync with leader'),
    'NotInSync',
  ],
  [new GRPCFailedPreconditionError('9 FAILED_PRECONDITION: etcdserver: can only promote a learner member'), 'NotALearner'],
  [new GRPCNotFoundError('5 NOT_FOUND: etcdserver: member not found'), 'MemberNotFound'],
  [new GRPCFailedPreconditionError('9 FAILED_PRECONDITION: etcdserver: Peer URLs already exists'), 'PeerURLExists'],
  [new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: unhealthy cluster'), 'UnhealthyCluster'],
  [new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: rpc not supported for learner'), 'LearnerRpc'],
  [new GRPCFailedPreconditionError('9 FAILED_PRECONDITION: etcdserver: bad leader transferee'), 'BadLeaderTransferee'],
  [new GRPCFailedPreconditionError('9 FAILED_PRECONDITION: etcdserver: not leader'), 'NotLeader'],
  [
    new GRPCFailedPreconditionError('9 FAILED_PRECONDITION: etcdserver: re-configuration failed due to not enough started members'),
    'NotEnoughStartedMembers',
  ],
  [new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: server stopped'), 'ServerStopped'],
  [new GRPCDeadlineExceededError('4 DEADLINE_EXCEEDED: Deadline exceeded after 4.003s,LB pick: 0.001s,remote_addr=127.0.0.1:2379'), 'Timeout'],
  [new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: request timed out'), 'Timeout'],
  [
    new GRPCUnavailableError(
      '14 UNAVAILABLE: No connection established. Last error: Error: connect ECONNREFUSED 127.0.0.250:2379. Resolution note: ',
    ),
    'Unreachable',
  ],
  [new GRPCUnavailableError('14 UNAVAILABLE: Connection dropped'), 'Unreachable'],
  [new Error('connect ECONNREFUSED 127.0.0.1:2379'), 'Unreachable'],
  [new GRPCUnavailableError('14 UNAVAILABLE: etcdserver: leader changed'), 'Unknown'],
  [new BrokenCircuitError(), 'Unknown'],
];

test('classifyEtcdError maps the real etcd messages to their kinds', () => {
  for (const [error, kind] of CASES) {
    const classified = classifyEtcdError(error);
    assert.equal(classified.kind, kind, error.message);
    assert.equal(classified.message, error.message, 'the original text is kept');
  }
});

test('classifyEtcdError keeps an EtcdAdminError and accepts non-errors', () => {
  const known = new EtcdAdminError('NotInSync', 'x');
  assert.equal(classifyEtcdError(known), known);
  assert.equal(classifyEtcdError('boom').kind, 'Unknown');
  assert.equal(classifyEtcdError(undefined).kind, 'Unknown');
});

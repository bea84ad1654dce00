import assert from 'node:assert/strict';
import { test } from 'node:test';
import { criticalPathBound } from '../../src/bench/critical-path-bound.ts';
import { milestonesAhead } from '../../src/bench/milestones.ts';
import { etcdOnlyExample, kubernetesExample } from '../support/bound-example.ts';

// The example of test/support/bound-example.ts, worked out by hand there.
const etcdOnly = etcdOnlyExample;
const inputs = kubernetesExample;
const bound = criticalPathBound(inputs);

test('the Kubernetes bound of the example, worked out by hand', () => {
  assert.equal(bound.initDoneAt, 31);
  assert.deepEqual(
    bound.joins.map((j) => [j.machine, j.addAt, j.promotedAt]),
    [
      [2, 31, 33],
      [1, 36, 38],
    ],
  );
  assert.deepEqual(
    bound.components?.map((c) => [c.machine, c.voterAt, c.apiserverReadyAt, c.readyAt]),
    [
      [0, 31, 37, 38],
      [2, 33, 39, 40],
      [1, 38, 44, 45],
    ],
  );
  assert.equal(bound.seconds, 45);
});

test('the bound names the design it bounds, and an etcd-only bound has no component terms', () => {
  const plain = criticalPathBound(etcdOnly);
  assert.equal(plain.seconds, 38);
  assert.equal(plain.components, undefined);
  assert.match(plain.design, /^etcd only: the first ready machine initialised/);
  assert.match(bound.design, /^Kubernetes control plane, kubeadm's stacked topology: .*kube-apiserver started, ready \(\/readyz\), in the endpoint, then controller-manager and scheduler$/);
});

const onTime = { initServingAt: 31.2, promotedAt: [33.4, 38.1], catchUps: [] };

test('apiservers ready no sooner than their bound are no milestone ahead', () => {
  const apiservers = [
    { machine: 'm1', readyAt: 37.1, startToReadySeconds: 6.0 },
    { machine: 'm3', readyAt: 39.6, startToReadySeconds: 6.3 },
    { machine: 'm2', readyAt: 44.02, startToReadySeconds: null },
  ];
  assert.deepEqual(milestonesAhead(bound, inputs.joinSeconds, { ...onTime, apiservers }, 6), []);
});

test('the n-th apiserver ready before the bound n-th, or one started faster than calibrated, is ahead', () => {
  const apiservers = [
    { machine: 'm1', readyAt: 37.1, startToReadySeconds: 6.1 },
    // Ready before the bound's second apiserver (39), though after its own vote plus a start.
    { machine: 'm3', readyAt: 38.5, startToReadySeconds: 5.5 },
    { machine: 'm2', readyAt: 45, startToReadySeconds: 6.2 },
  ];
  assert.deepEqual(milestonesAhead(bound, inputs.joinSeconds, { ...onTime, apiservers }, 6), [
    { milestone: 'apiserver ready 2', observedSeconds: 38.5, boundSeconds: 39 },
    { milestone: 'm3 apiserver start', observedSeconds: 5.5, boundSeconds: 6 },
  ]);
});

test('without the bound\'s component terms, observed apiservers are not checked against anything', () => {
  const plain = criticalPathBound(etcdOnly);
  assert.deepEqual(milestonesAhead(plain, etcdOnly.joinSeconds, { ...onTime, apiservers: [{ machine: 'm1', readyAt: 1, startToReadySeconds: null }] }), []);
});

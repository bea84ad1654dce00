import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { KubernetesComponent } from '../../src/ports/machine-provider.ts';
import type { Decision, Observed, ObservedComponent, ObservedMachine } from '../../src/planner/types.ts';
import { decide, waitOf } from '../support/decision.ts';
import { healthyObserved, learner, machine, NOW, observed, spec, voter } from '../support/observed.ts';

// A Kubernetes machine joins as kubeadm stacks it: voter, apiserver, endpoint, then controller-manager
// and scheduler; it leaves out of the endpoint and with its components stopped before its member goes.

const k8s = spec({ kubernetes: { version: '1.36.3' } });
const READY: ObservedComponent = { running: true, healthy: true };
const STARTING: ObservedComponent = { running: true, healthy: false, reason: '/readyz answered 500' };
const DOWN: ObservedComponent = { running: false, healthy: false, reason: 'its process is not running' };

type Components = Partial<Record<KubernetesComponent, ObservedComponent>>;
const all = (state: ObservedComponent): Components => ({ 'kube-apiserver': state, 'kube-controller-manager': state, 'kube-scheduler': state });

function withComponents(m: ObservedMachine, components: Components): ObservedMachine {
  if (m.infra === undefined) throw new Error('no infra');
  return { ...m, infra: { ...m.infra, components } };
}

/** A healthy 3-voter cluster whose machines' components are as given, and an endpoint routing to `routes`. */
function cluster(components: Record<string, Components>, routes: string[] | undefined, down: string[] = []): Observed {
  const o = healthyObserved(3);
  o.machines = o.machines.map((m) => withComponents(m, components[m.record.name] ?? all(DOWN)));
  o.endpoint = { address: '127.77.1.0:6443', ...(routes === undefined ? {} : { routes: routes.map((name) => ({ machine: name, up: !down.includes(name) })) }) };
  return o;
}

const componentActions = (d: Decision): string[] =>
  d.machineActions.flatMap((a) => (a.kind === 'StartComponent' ? [`${a.machine} ${a.component}`] : a.kind === 'StopComponents' ? [`stop ${a.machine}`] : a.kind === 'RouteEndpoint' ? [`route ${a.machines.join(',')}`] : []));

describe('a Kubernetes machine joins', () => {
  test('an etcd-only control plane plans no component and waits for none', () => {
    const d = decide(healthyObserved(3));
    assert.deepEqual(componentActions(d), []);
    assert.equal(d.converged, true);
  });

  test('each voter gets its apiserver first; nothing else starts before it is ready', () => {
    const d = decide(cluster({}, undefined), k8s);
    assert.deepEqual(componentActions(d), ['t-1 kube-apiserver', 't-2 kube-apiserver', 't-3 kube-apiserver']);
    assert.equal(d.converged, false);
  });

  test('a learner gets no apiserver: it starts once the member votes', () => {
    const o = observed({ machines: [machine('t-1', { phase: 'Voter' }), machine('t-2', { phase: 'Learner' })], members: [voter('t-1'), learner('t-2')] });
    o.endpoint = { address: '127.77.1.0:6443' };
    assert.deepEqual(componentActions(decide(o, k8s)), ['t-1 kube-apiserver']);
  });

  test('an apiserver still starting is not routed to; a ready one is, and the endpoint starts with it', () => {
    const d = decide(cluster({ 't-1': { 'kube-apiserver': READY }, 't-2': { 'kube-apiserver': STARTING }, 't-3': { 'kube-apiserver': STARTING } }, undefined), k8s);
    assert.deepEqual(componentActions(d), ['route t-1']);
  });

  test('controller-manager and scheduler start only on a machine the endpoint routes to', () => {
    const d = decide(cluster({ 't-1': { 'kube-apiserver': READY }, 't-2': { 'kube-apiserver': READY }, 't-3': { 'kube-apiserver': STARTING } }, ['t-1']), k8s);
    assert.deepEqual(componentActions(d), ['t-1 kube-controller-manager', 't-1 kube-scheduler', 'route t-1,t-2']);
  });

  test('converged only when every component is healthy and the endpoint routes to every machine and finds it up', () => {
    const ready = { 't-1': all(READY), 't-2': all(READY), 't-3': all(READY) };
    assert.equal(decide(cluster(ready, ['t-1', 't-2', 't-3']), k8s).converged, true);
    const notUp = decide(cluster(ready, ['t-1', 't-2', 't-3'], ['t-3']), k8s);
    assert.equal(notUp.converged, false);
    assert.match(waitOf(notUp, 'ComponentsNotReady').message, /the endpoint does not route to t-3 yet/);
    const schedulerDown = decide(cluster({ ...ready, 't-2': { ...all(READY), 'kube-scheduler': STARTING } }, ['t-1', 't-2', 't-3']), k8s);
    assert.match(waitOf(schedulerDown, 'ComponentsNotReady').message, /t-2: kube-scheduler \/readyz answered 500/);
  });

  test('ControlPlaneComponentsHealthy and MachinesReady count a machine only when every component is healthy', () => {
    const ready = { 't-1': all(READY), 't-2': all(READY), 't-3': all(READY) };
    const healthy = decide(cluster(ready, ['t-1', 't-2', 't-3']), k8s);
    assert.equal(healthy.conditions.find((c) => c.type === 'ControlPlaneComponentsHealthy')?.status, 'True');
    const d = decide(cluster({ ...ready, 't-2': { ...all(READY), 'kube-apiserver': STARTING } }, ['t-1', 't-3']), k8s);
    assert.deepEqual(
      d.conditions.filter((c) => c.type === 'ControlPlaneComponentsHealthy' || c.type === 'MachinesReady').map((c) => [c.type, c.status, c.message]),
      [
        ['MachinesReady', 'False', '2/3 machines are healthy voters with every component healthy'],
        ['ControlPlaneComponentsHealthy', 'False', 'not healthy: t-2: kube-apiserver'],
      ],
    );
    assert.equal(decide(healthyObserved(3)).conditions.some((c) => c.type === 'ControlPlaneComponentsHealthy'), false);
  });

  test('a component that stopped is started again', () => {
    const d = decide(cluster({ 't-1': all(READY), 't-2': { ...all(READY), 'kube-controller-manager': DOWN }, 't-3': all(READY) }, ['t-1', 't-2', 't-3']), k8s);
    assert.deepEqual(componentActions(d), ['t-2 kube-controller-manager']);
  });

  test('an apiserver that is no longer ready is taken out of the endpoint', () => {
    const d = decide(cluster({ 't-1': all(READY), 't-2': { ...all(READY), 'kube-apiserver': STARTING }, 't-3': all(READY) }, ['t-1', 't-2', 't-3']), k8s);
    assert.deepEqual(componentActions(d), ['route t-1,t-3']);
  });
});

describe('a Kubernetes machine leaves drained', () => {
  const ready = { 't-1': all(READY), 't-2': all(READY), 't-3': all(READY) };

  test('scale down: out of the endpoint first; its member stays until it is drained', () => {
    // KCP lets the oldest machines go first: t-1 and t-2.
    const d = decide(cluster(ready, ['t-1', 't-2', 't-3']), { ...k8s, replicas: 1 });
    assert.deepEqual(componentActions(d), ['route t-3']);
    assert.equal(d.membershipAction, undefined);
    assert.match(waitOf(d, 'Draining').message, /the endpoint still routes to t-/);
  });

  test('then its components stop, and only then its member is removed', () => {
    const leaving = (o: Observed): Observed => ({ ...o, machines: o.machines.map((m) => (m.record.name === 't-3' ? { ...m, record: { ...m.record, deleteRequested: { reason: 'ScaleDown', at: 0 } } } : m)) });
    const stopping = decide(leaving(cluster(ready, ['t-1', 't-2'])), k8s);
    assert.deepEqual(componentActions(stopping), ['stop t-3']);
    assert.match(waitOf(stopping, 'Draining').message, /t-3 still runs kube-apiserver, kube-controller-manager, kube-scheduler/);
    const drained = decide(leaving(cluster({ ...ready, 't-3': all(DOWN) }, ['t-1', 't-2'])), k8s);
    assert.deepEqual(componentActions(drained), []);
    assert.equal(drained.membershipAction?.kind, 'RemoveMember');
    assert.equal(drained.membershipAction.machine, 't-3');
  });
});

describe('a Kubernetes machine whose apiserver stops being ready', () => {
  const ready = { 't-1': all(READY), 't-2': all(READY), 't-3': all(READY) };
  const unhealthyFor = (o: Observed, name: string, ms: number): Observed => ({
    ...o,
    machines: o.machines.map((m) => (m.record.name === name ? { ...m, record: { ...m.record, apiserverReadyAt: NOW - 600_000, apiserverUnhealthySince: NOW - ms } } : m)),
  });

  test('is replaced once unhealthy for unhealthyAfter, while another apiserver serves', () => {
    const o = unhealthyFor(cluster({ ...ready, 't-2': { ...all(READY), 'kube-apiserver': STARTING } }, ['t-1', 't-3']), 't-2', 10_000);
    const marks = decide(o, k8s).machineActions.filter((a) => a.kind === 'MarkMachineFailed');
    assert.deepEqual(marks.map((a) => [a.machine, a.reason]), [['t-2', 'APIServerUnhealthy']]);
  });

  test('is given unhealthyAfter first', () => {
    const o = unhealthyFor(cluster({ ...ready, 't-2': { ...all(READY), 'kube-apiserver': STARTING } }, ['t-1', 't-3']), 't-2', 9_000);
    assert.equal(decide(o, k8s).machineActions.some((a) => a.kind === 'MarkMachineFailed'), false);
  });

  test('is kept while no other apiserver serves: the control plane never takes its last API away itself', () => {
    let o = cluster({ 't-1': { ...all(READY), 'kube-apiserver': STARTING }, 't-2': { ...all(READY), 'kube-apiserver': STARTING }, 't-3': { ...all(READY), 'kube-apiserver': STARTING } }, []);
    for (const name of ['t-1', 't-2', 't-3']) o = unhealthyFor(o, name, 60_000);
    const d = decide(o, k8s);
    assert.equal(d.machineActions.some((a) => a.kind === 'MarkMachineFailed'), false);
    assert.match(waitOf(d, 'NoOtherAPIServer').message, /no other apiserver serves/);
  });
});

describe('a Kubernetes version rollout', () => {
  const k137 = spec({ kubernetes: { version: '1.37.2' }, replicas: 3 });
  const at = (m: ObservedMachine, version: string): ObservedMachine => ({ ...m, record: { ...m.record, kubernetesVersion: version } });

  function rolling(oldApiservers: ObservedComponent): Observed {
    const o = observed({
      machines: [...['t-1', 't-2', 't-3'].map((name) => machine(name, { phase: 'Voter' })), machine('t-4', { phase: 'Voter' })],
      members: ['t-1', 't-2', 't-3', 't-4'].map((name) => voter(name)),
    });
    o.machines = o.machines.map((m) => (m.record.name === 't-4' ? withComponents(at({ ...m, record: { ...m.record, templateHash: k137.templateHash } }, '1.37.2'), { 'kube-apiserver': READY }) : withComponents(at(m, '1.36.3'), { ...all(READY), 'kube-apiserver': oldApiservers })));
    o.endpoint = { address: '127.77.1.0:6443', routes: ['t-1', 't-2', 't-3', 't-4'].map((name) => ({ machine: name, up: true })) };
    return o;
  }

  test("a new machine's controller-manager and scheduler wait while an older apiserver runs", () => {
    const d = decide(rolling(READY), k137);
    assert.ok(!componentActions(d).some((a) => a.startsWith('t-4 kube-')), JSON.stringify(componentActions(d)));
    assert.match(waitOf(d, 'VersionSkew').message, /t-4 starts its controller-manager and scheduler \(Kubernetes 1\.37\.2\) once no older apiserver runs: t-1 at 1\.36\.3/);
  });

  test('they start once no older apiserver runs', () => {
    const d = decide(rolling(DOWN), k137);
    assert.deepEqual(componentActions(d).filter((a) => a.startsWith('t-4')), ['t-4 kube-controller-manager', 't-4 kube-scheduler']);
  });

  test('machines at the old version are outdated: the new version rolls them', () => {
    const d = decide(rolling(READY), k137);
    assert.ok(d.machineActions.some((a) => a.kind === 'RequestMachineDeletion'), 'an old machine is picked to go');
  });
});

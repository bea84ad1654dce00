import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { plan } from '../../src/planner/plan.ts';
import type { ObservedComponent, ObservedMachine } from '../../src/planner/types.ts';
import { KUBERNETES_COMPONENTS } from '../../src/ports/machine-provider.ts';
import { learner, machine, memberIdOf, NOW, observed, spec, voter } from '../support/observed.ts';
import { RUNS } from './arbitraries.ts';

/**
 * A Kubernetes control plane's join and leave order, on random observations: whatever the planner
 * decides, the rules restated here independently of src/planner/components.ts hold. An apiserver
 * starts only on a machine whose member votes; a controller-manager or scheduler only on a machine the
 * endpoint routes to and whose apiserver is ready; the endpoint is told to route only to ready
 * apiservers of staying machines; and a member is removed only from a machine the endpoint no longer
 * routes to and whose components are all stopped.
 */

const componentArb = fc.constantFrom<ObservedComponent>(
  { running: true, healthy: true },
  { running: true, healthy: true },
  { running: true, healthy: false, reason: 'not ready' },
  { running: false, healthy: false, reason: 'not running' },
);

const machineArb = fc.record({
  learner: fc.boolean(),
  leaving: fc.boolean(),
  routed: fc.constantFrom(true, false, false),
  apiserver: componentArb,
  controllerManager: componentArb,
  scheduler: componentArb,
});

const clusterArb = fc.record({
  machines: fc.array(machineArb, { minLength: 1, maxLength: 6 }),
  replicas: fc.constantFrom(1, 3, 5),
  endpointRunning: fc.boolean(),
});

test('components start, route and leave in kubeadm and KCP order on any observation', () => {
  fc.assert(
    fc.property(clusterArb, (cluster) => {
      const names = cluster.machines.map((_, i) => `t-${String(i + 1)}`);
      const machines: ObservedMachine[] = cluster.machines.map((m, i) => {
        const built = machine(names[i] ?? '', { phase: m.learner && i > 0 ? 'Learner' : 'Voter', ...(m.leaving ? { deleteRequested: true } : {}) });
        if (built.infra === undefined) throw new Error('no infra');
        return { ...built, infra: { ...built.infra, components: { 'kube-apiserver': m.apiserver, 'kube-controller-manager': m.controllerManager, 'kube-scheduler': m.scheduler } } };
      });
      const leader = memberIdOf('t-1');
      const members = cluster.machines.map((m, i) => (m.learner && i > 0 ? learner(names[i] ?? '', { leader }) : voter(names[i] ?? '', { leader })));
      const o = observed({ machines, members });
      const routes = names.filter((_, i) => cluster.machines[i]?.routed === true).map((name) => ({ machine: name, up: true }));
      o.endpoint = { address: '127.77.1.0:6443', ...(cluster.endpointRunning ? { routes } : {}) };
      const d = plan(spec({ kubernetes: { version: '1.36.3' }, replicas: cluster.replicas }), o, NOW);
      const at = (name: string): (typeof cluster.machines)[number] => cluster.machines[names.indexOf(name)] ?? assert.fail(name);
      const routedNow = new Set(cluster.endpointRunning ? routes.map((r) => r.machine) : []);
      const votes = (name: string): boolean => !(at(name).learner && names.indexOf(name) > 0);
      for (const action of d.machineActions) {
        if (action.kind === 'StartComponent' && action.component === 'kube-apiserver') assert.ok(votes(action.machine), `apiserver started on learner ${action.machine}`);
        if (action.kind === 'StartComponent' && action.component !== 'kube-apiserver') {
          assert.ok(routedNow.has(action.machine) && at(action.machine).apiserver.healthy, `${action.component} started on ${action.machine} before its apiserver serves through the endpoint`);
        }
        if (action.kind === 'RouteEndpoint') {
          for (const name of action.machines) assert.ok(at(name).apiserver.healthy && !at(name).leaving, `routed to ${name}, not ready or leaving`);
        }
      }
      const removal = d.membershipAction;
      if (removal?.kind === 'RemoveMember' && removal.machine !== undefined) {
        const m = at(removal.machine);
        assert.ok(!routedNow.has(removal.machine), `member of ${removal.machine} removed while the endpoint routes to it`);
        assert.ok(KUBERNETES_COMPONENTS.every((_, k) => ![m.apiserver, m.controllerManager, m.scheduler][k]?.running), `member of ${removal.machine} removed while a component runs`);
      }
    }),
    { numRuns: RUNS },
  );
});

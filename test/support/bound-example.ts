import type { BoundInputs } from '../../src/bench/critical-path-bound.ts';

/**
 * The bound tests' example: three machines ready at 30, 31 and 30.5 s; init 1 s, join 2 s, etcd
 * 3.5.30's add rule, one learner at a time. By hand: machine 0 (first ready) serves at 31; machine 2
 * is added at 31 (one voter: no rule), promoted at 33; machine 1 is added once machine 2 has been
 * connected 5 s (a quorum of the 3 voters after the add needs it), at 36, promoted at 38.
 */
export const etcdOnlyExample: BoundInputs = {
  readySeconds: [30, 31, 30.5],
  initSeconds: 1,
  joinSeconds: 2,
  addRule: 'quorum-of-resulting',
  connectedSeconds: 5,
  existingVoters: 0,
  learnerLimit: 1,
};

/**
 * The example with Kubernetes: kube-apiserver 6 s from start to /readyz, controller-manager and
 * scheduler 1 s. Apiservers ready at 31 + 6 = 37, 33 + 6 = 39, 38 + 6 = 44; each machine ready 1 s
 * later: 38, 40, 45. The critical path ends at 45, the last machine ready, not the last promotion, 38.
 */
export const kubernetesExample: BoundInputs = { ...etcdOnlyExample, kubernetes: { apiserverSeconds: 6, controllersSeconds: 1 } };

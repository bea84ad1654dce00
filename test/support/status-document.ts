import { defaultControlPlane } from '../../src/api/control-plane.ts';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';

// Status documents (what `fastplane status -o json` prints) for the tests of the objects' status.

/** A running voter's entry; with `kubernetesVersion` when it runs a Kubernetes control plane. */
export function machine(name: string, version: string, kubernetesVersion?: string): ControlPlaneStatusDocument['status']['machines'][number] {
  return {
    name,
    phase: 'Running',
    role: 'voter',
    memberId: '1',
    address: null,
    clientURL: null,
    peerURL: null,
    version,
    ...(kubernetesVersion === undefined ? {} : { kubernetesVersion }),
    failureDomain: null,
    createdAt: '2026-12-07T09:00:00.000Z',
    phaseTimes: {},
  };
}

/** A document of 3 machines mid rollout from 3.5.30 to the spec's 3.6.17: one updated, two to go. */
export function rollingOut(): ControlPlaneStatusDocument {
  const manifest = defaultControlPlane('web');
  manifest.spec.replicas = 3;
  return {
    name: 'web',
    metadata: { name: 'web', generation: 4 },
    spec: manifest.spec,
    status: {
      observedGeneration: 4,
      reconciler: null,
      phase: 'RollingOut',
      replicas: 3,
      readyReplicas: 2,
      voters: 3,
      learners: 1,
      leader: 'web-1',
      endpoints: [],
      conditions: [
        { type: 'Available', status: 'True', reason: 'QuorumHealthy', message: '3 healthy voters, quorum 2', lastTransitionTime: '2026-12-07T09:10:00.123Z' },
        { type: 'RollingOut', status: 'True', reason: 'RollingOut', message: 'RollingOut in progress', lastTransitionTime: '2026-12-07T09:50:00.000Z' },
        { type: 'ScalingUp', status: 'False', reason: 'NotScalingUp', message: '', lastTransitionTime: '2026-12-07T09:10:00.000Z' },
      ],
      machines: [machine('web-1', '3.5.30'), machine('web-2', '3.6.17'), machine('web-3', '3.5.30'), machine('web-4', '3.6.17')],
      waits: [],
    },
  };
}

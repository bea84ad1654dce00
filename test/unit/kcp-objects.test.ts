import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { InvalidInputError } from '../../src/api/errors.ts';
import { kcpCrdForFastplane } from '../../src/api/kcp/kcp-crd.ts';
import { kcpStatus, kubeadmControlPlaneKind } from '../../src/controller/kcp-objects.ts';
import { TEARDOWN_FINALIZER } from '../../src/controller/object-sync.ts';
import { objectStatus } from '../../src/controller/object-status.ts';
import type { ControlPlaneObject } from '../../src/ports/control-plane-objects.ts';
import { machine, rollingOut } from '../support/status-document.ts';

// Cluster API KubeadmControlPlanes as the controller takes them: which objects, the spec they mean,
// the status in KCP v1beta2's fields, and the CRD made safe to apply without Cluster API's webhook.

const NOW = Date.parse('2026-12-07T10:00:00.000Z');

/** rollingOut() with Kubernetes on its machines (two at 1.35.2, two at 1.36.3) and fastplane's UpToDate condition. */
function withKubernetes(): ReturnType<typeof rollingOut> {
  const doc = rollingOut();
  doc.status.machines = [machine('web-1', '3.5.30', '1.36.3'), machine('web-2', '3.6.17', '1.35.2'), machine('web-3', '3.5.30', '1.36.3'), machine('web-4', '3.6.17', '1.35.2')];
  doc.status.conditions.push({ type: 'UpToDate', status: 'False', reason: 'NotUpToDate', message: '2 of 4 machines not at the spec', lastTransitionTime: '2026-12-07T09:50:00.000Z' });
  return doc;
}

function object(change: Partial<ControlPlaneObject> = {}): ControlPlaneObject {
  const spec = { replicas: 3, version: 'v1.34.1', machineTemplate: { spec: { infrastructureRef: { apiGroup: 'infrastructure.cluster.x-k8s.io', kind: 'DockerMachineTemplate', name: 'web' } } } };
  return { namespace: 'default', name: 'web', uid: 'u1', generation: 1, resourceVersion: '1', finalizers: [], deleting: false, spec, ...change };
}

describe('kcpStatus', () => {
  test("KCP v1beta2's counters, the lowest Kubernetes version and each version's count, v1beta1's counters under deprecated", () => {
    const doc = withKubernetes();
    const body = kcpStatus(objectStatus({ generation: 7, document: doc, previous: undefined, now: NOW }), doc);
    assert.deepEqual(
      { ...body, conditions: undefined },
      {
        observedGeneration: 7,
        conditions: undefined,
        replicas: 4,
        readyReplicas: 2,
        availableReplicas: 2,
        upToDateReplicas: 2,
        version: 'v1.35.2',
        versions: [
          { version: 'v1.35.2', replicas: 2 },
          { version: 'v1.36.3', replicas: 2 },
        ],
        initialization: { controlPlaneInitialized: true },
        deprecated: { v1beta1: { readyReplicas: 2, updatedReplicas: 2, unavailableReplicas: 2 } },
      },
    );
  });

  test("the conditions keep their reasons and generation; UpToDate takes KCP's name MachinesUpToDate", () => {
    const doc = withKubernetes();
    const { conditions } = kcpStatus(objectStatus({ generation: 7, document: doc, previous: undefined, now: NOW }), doc) as { conditions: { type: string; reason: string; observedGeneration: number }[] };
    assert.deepEqual(
      conditions.map((c) => [c.type, c.reason, c.observedGeneration]),
      [
        ['Available', 'QuorumHealthy', 7],
        ['RollingOut', 'RollingOut', 7],
        ['ScalingUp', 'NotScalingUp', 7],
        ['MachinesUpToDate', 'NotUpToDate', 7],
      ],
    );
  });

  test('etcd only: no Kubernetes version to report; nothing on record yet: no counters and not initialized', () => {
    const doc = rollingOut();
    const body = kcpStatus(objectStatus({ generation: 2, document: doc, previous: undefined, now: NOW }), doc);
    assert.equal(body.version, undefined);
    assert.equal(body.versions, undefined);
    assert.equal(body.replicas, 4);
    const none = kcpStatus(objectStatus({ generation: 1, document: undefined, previous: undefined, now: NOW }), undefined);
    assert.deepEqual(Object.keys(none), ['observedGeneration', 'conditions']);
  });
});

describe('kubeadmControlPlaneKind', () => {
  const kind = kubeadmControlPlaneKind(() => ['3.5.30', '3.6.17'], () => ['1.36.3']);

  test('takes the objects annotated fastplane.dev/manage: "true", and those that already carry its finalizer', () => {
    assert.ok(kind.manages(object({ annotations: { 'fastplane.dev/manage': 'true' } })));
    assert.ok(!kind.manages(object()));
    assert.ok(!kind.manages(object({ annotations: { 'fastplane.dev/manage': 'false' } })));
    assert.ok(kind.manages(object({ finalizers: [TEARDOWN_FINALIZER] })), 'its deletion still tears the machines down');
  });

  test("converts the spec with fastplane convert's converter; a spec it refuses is InvalidInputError in its words", () => {
    const { spec, notes } = kind.specOf(object());
    assert.deepEqual((spec as { replicas: number }).replicas, 3);
    assert.ok(notes.some((n) => /^kubernetes: v1\.34\.1 -> Kubernetes 1\.34 is not built here/.test(n)), notes.join('\n'));
    assert.ok(notes.some((n) => n.startsWith('warning: spec.machineTemplate: ignored')), notes.join('\n'));
    const even = object({ spec: { ...(object().spec as object), replicas: 4 } });
    assert.throws(() => kind.specOf(even), (error: unknown) => error instanceof InvalidInputError && /spec\.replicas: must be odd with stacked etcd/.test(error.problems.join('\n')));
  });
});

describe('kcpCrdForFastplane', () => {
  const scale = { scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas', labelSelectorPath: '.status.selector' } };
  const crd = {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'kubeadmcontrolplanes.controlplane.cluster.x-k8s.io' },
    spec: {
      group: 'controlplane.cluster.x-k8s.io',
      names: { kind: 'KubeadmControlPlane', plural: 'kubeadmcontrolplanes' },
      versions: [
        { name: 'v1beta1', served: true, storage: false, subresources: scale },
        { name: 'v1beta2', served: true, storage: true, subresources: scale },
      ],
    },
  };

  test('conversion None and only v1beta2 served: without the webhook, v1beta1 objects would be stored misshapen', () => {
    const safe = kcpCrdForFastplane(crd, 'kcp.yaml') as { spec: { conversion: unknown; versions: { name: string; served: boolean; storage: boolean }[] } };
    assert.deepEqual(safe.spec.conversion, { strategy: 'None' });
    assert.deepEqual(safe.spec.versions.map((v) => [v.name, v.served, v.storage]), [['v1beta1', false, false], ['v1beta2', true, true]]);
  });

  test('another document, a CRD older than v1beta2 storage, or one without the scale subresource is refused', () => {
    const refused = (doc: unknown, words: RegExp): void => {
      assert.throws(() => kcpCrdForFastplane(doc, 'kcp.yaml'), (error: unknown) => error instanceof InvalidInputError && words.test(error.problems.join('\n')));
    };
    refused({ ...crd, metadata: { name: 'machines.cluster.x-k8s.io' } }, /^--kubeadm-control-plane-crd: kcp\.yaml: not the CustomResourceDefinition kubeadmcontrolplanes\.controlplane\.cluster\.x-k8s\.io/);
    refused({ ...crd, spec: { ...crd.spec, versions: [{ name: 'v1beta1', served: true, storage: true }] } }, /v1beta2 is not its storage version/);
    refused({ ...crd, spec: { ...crd.spec, versions: [{ name: 'v1beta2', served: true, storage: true }] } }, /v1beta2 has no scale subresource/);
  });
});

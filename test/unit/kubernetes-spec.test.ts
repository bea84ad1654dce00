import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { API_VERSION, KIND, validateControlPlane } from '../../src/api/control-plane.ts';
import { defaultEtcdFor, validateKubernetesChange } from '../../src/api/kubernetes.ts';
import { problemsOf } from '../support/problems.ts';

const manifest = (spec: Record<string, unknown>): unknown => ({ apiVersion: API_VERSION, kind: KIND, metadata: { name: 'k' }, spec });

describe('spec.kubernetes', () => {
  test('absent: an etcd-only control plane at the default etcd', () => {
    const { spec } = validateControlPlane(manifest({}));
    assert.equal(spec.kubernetes, undefined);
    assert.equal(spec.version, '3.6.17');
  });

  test('the version is kept without its v, and etcd defaults to the line kubeadm pairs with the minor', () => {
    const { spec } = validateControlPlane(manifest({ kubernetes: { version: 'v1.36.3' } }));
    assert.deepEqual(spec.kubernetes, { version: '1.36.3' });
    // kubeadm pairs 1.36 with a 3.6 release; the newest 3.6 fastplane builds runs it.
    assert.equal(spec.version, '3.6.17');
    assert.equal(defaultEtcdFor('1.29.0'), '3.5.36');
  });

  test('an etcd version named beside it is kept', () => {
    assert.equal(validateControlPlane(manifest({ kubernetes: { version: '1.36.3' }, version: '3.5.36' })).spec.version, '3.5.36');
  });

  test('bad input names the field: a malformed version, a relative binaries path, insecure', () => {
    assert.deepEqual(problemsOf(() => validateControlPlane(manifest({ kubernetes: { version: '1.36' } }))), ['spec.kubernetes.version: must be a Kubernetes version such as 1.36.3']);
    assert.deepEqual(problemsOf(() => validateControlPlane(manifest({ kubernetes: { version: '1.36.3', binaries: 'bin' } }))), ['spec.kubernetes.binaries: must be an absolute directory path']);
    assert.deepEqual(problemsOf(() => validateControlPlane(manifest({ kubernetes: { version: '1.36.3' }, provider: { insecure: true } }))), [
      'spec.kubernetes: needs certificates: a Kubernetes control plane cannot run with spec.provider.insecure',
    ]);
  });
});

describe('a change of spec.kubernetes', () => {
  test('a patch either way and one minor up are allowed; turning it on is allowed', () => {
    assert.equal(validateKubernetesChange('1.36.3', '1.36.1'), undefined);
    assert.equal(validateKubernetesChange('1.36.3', '1.37.2'), undefined);
    assert.equal(validateKubernetesChange(undefined, '1.36.3'), undefined);
    assert.equal(validateKubernetesChange(undefined, undefined), undefined);
  });

  test('a minor skip, a minor down and removing it are refused with the way forward', () => {
    assert.equal(validateKubernetesChange('1.36.3', '1.38.0'), 'spec.kubernetes.version: cannot skip a minor version (1.36.3 -> 1.38.0); the control plane runs 1.36.3: upgrade to 1.37 first');
    assert.equal(validateKubernetesChange('1.37.2', '1.36.3'), 'spec.kubernetes.version: cannot go down a minor version (1.37.2 -> 1.36.3); the control plane runs 1.37.2, and Kubernetes supports no downgrade');
    assert.equal(validateKubernetesChange('1.36.3', undefined), 'spec.kubernetes: cannot be removed from a control plane that runs Kubernetes 1.36.3; run fastplane down first');
  });

  test('a machine still at an older minor holds a further upgrade back', () => {
    assert.match(validateKubernetesChange('1.37.2', '1.38.0', ['1.36.3']) ?? '', /a machine still runs 1\.36\.3/);
  });
});

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { parse } from 'yaml';
import { etcdForKubernetes, KUBEADM_ETCD_VERSIONS, nearestInstalled } from '../../src/api/kcp/etcd-versions.ts';
import { convertKubeadmControlPlane, type KcpConversion } from '../../src/api/kcp/kubeadm-control-plane.ts';
import { problemsOf } from '../support/problems.ts';

const FIXTURES = join(import.meta.dirname, '..', 'fixtures', 'kcp');
const INSTALLED = ['3.4.23', '3.5.16'];

function fixture(name: string): Record<string, unknown> {
  return parse(readFileSync(join(FIXTURES, name), 'utf8')) as Record<string, unknown>;
}

function convert(doc: Record<string, unknown>, installed = INSTALLED): KcpConversion {
  return convertKubeadmControlPlane(doc, installed);
}

/** Sets a value at a dotted path of a copy of the document. */
function withField(doc: Record<string, unknown>, path: string, value: unknown): Record<string, unknown> {
  const copy = structuredClone(doc);
  const keys = path.split('.');
  let at: Record<string, unknown> = copy;
  for (const key of keys.slice(0, -1)) {
    at[key] ??= {};
    at = at[key] as Record<string, unknown>;
  }
  const last = keys[keys.length - 1]!;
  if (value === undefined) Reflect.deleteProperty(at, last);
  else at[last] = value;
  return copy;
}

/** Every leaf of a document as a dotted path; v1beta2's { name, value } lists are keyed by name, other lists are leaves. */
function leaves(value: unknown, path: string[] = []): string[] {
  if (Array.isArray(value) && value.every((item: { name?: unknown }) => typeof item.name === 'string')) {
    return (value as { name: string }[]).map((item) => [...path, item.name].join('.'));
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return [path.join('.')];
  return Object.entries(value).flatMap(([key, inner]) => leaves(inner, [...path, key]));
}

/** Fields the conversion reads; every other leaf must be covered by a warning. */
const USED_LEAVES = [
  /^apiVersion$/,
  /^kind$/,
  /^metadata\.name$/,
  /^spec\.(replicas|version)$/,
  /^spec\.kubeadmConfigSpec\.clusterConfiguration\.etcd\.local\.imageTag$/,
  /^spec\.kubeadmConfigSpec\.clusterConfiguration\.etcd\.local\.extraArgs\.(quota-backend-bytes|max-learners)$/,
  /^spec\.(rolloutStrategy|rollout\.strategy)\.(type|rollingUpdate\.maxSurge)$/,
  /^spec\.(remediationStrategy|remediation)\.\w+$/,
];

describe('KubeadmControlPlane: the shapes Cluster API writes', () => {
  test('v1beta1 quick start: 3 replicas, Kubernetes 1.30 -> kubeadm etcd 3.5.24 -> the nearest installed 3.5.16', () => {
    const { manifest, notes } = convert(fixture('quick-start-v1beta1.yaml'));
    assert.equal(manifest.metadata.name, 'capi-quickstart-control-plane');
    assert.equal(manifest.spec.replicas, 3);
    assert.equal(manifest.spec.version, '3.5.16');
    assert.equal(manifest.spec.rollout.maxSurge, 1, "KCP's default maxSurge");
    assert.equal(manifest.spec.remediation.maxRetry, 5, "no maxRetry: fastplane's default limit, not KCP's endless retries");
    assert.match(notes.join('\n'), /maxRetry 5 \(fastplane's default; KCP without maxRetry retries without limit\)/);
    assert.equal(manifest.spec.remediation.minHealthyPeriod, '1h');
    assert.match(notes.join('\n'), /v1\.30\.4 -> 3\.5\.24 .*SupportedEtcdVersion for 1\.30.* -> using 3\.5\.16 \(nearest installed/);
  });

  test('v1beta2 quick start: rollout.strategy read, 1.33 maps to 3.5.24', () => {
    const { manifest, notes } = convert(fixture('quick-start-v1beta2.yaml'));
    assert.equal(manifest.spec.replicas, 3);
    assert.equal(manifest.spec.rollout.maxSurge, 1);
    assert.match(notes[0]!, /v1\.33\.0 -> 3\.5\.24/);
  });

  test('v1beta1 remediation flavor: imageTag wins over the Kubernetes version; remediationStrategy durations; quota-backend-bytes', () => {
    const { manifest, notes } = convert(fixture('remediation-v1beta1.yaml'));
    assert.equal(manifest.spec.version, '3.5.16');
    assert.match(notes[0]!, /imageTag 3\.5\.16-0 -> 3\.5\.16 .* -> using 3\.5\.16 \(installed\)/);
    assert.deepEqual(
      { maxRetry: manifest.spec.remediation.maxRetry, retryPeriod: manifest.spec.remediation.retryPeriod, minHealthyPeriod: manifest.spec.remediation.minHealthyPeriod },
      { maxRetry: 5, retryPeriod: '2m', minHealthyPeriod: '2h' },
    );
    assert.equal(manifest.spec.etcd.quotaBackendBytes, 8_589_934_592);
  });

  test('v1beta2 scale-in flavor: maxSurge 0, *Seconds remediation, max-learners 2 refused on etcd 3.5 with a warning', () => {
    const { manifest, warnings } = convert(fixture('scale-in-v1beta2.yaml'));
    assert.equal(manifest.spec.replicas, 5);
    assert.equal(manifest.spec.rollout.maxSurge, 0);
    assert.equal(manifest.spec.remediation.retryPeriod, '90s');
    assert.equal(manifest.spec.remediation.minHealthyPeriod, '2h');
    assert.equal(manifest.spec.remediation.maxRetry, 3);
    assert.equal(manifest.spec.etcd.maxLearners, 'auto', 'auto: one learner at a time on 3.5');
    assert.ok(warnings.some((w) => /extraArgs\.max-learners: ignored: above 1 needs etcd 3\.6/.test(w)), warnings.join('\n'));
  });

  test('max-learners is kept when the etcd used is 3.6', () => {
    const { manifest } = convert(fixture('scale-in-v1beta2.yaml'), ['3.5.16', '3.6.9']);
    assert.equal(manifest.spec.version, '3.6.9');
    assert.equal(manifest.spec.etcd.maxLearners, 2);
  });

  for (const name of ['quick-start-v1beta1.yaml', 'quick-start-v1beta2.yaml', 'remediation-v1beta1.yaml', 'scale-in-v1beta2.yaml']) {
    test(`${name}: every field is either used or named in a warning, never dropped silently`, () => {
      const doc = fixture(name);
      const { warnings } = convert(doc);
      const warned = warnings.map((w) => w.slice(0, w.indexOf(': ')));
      for (const leaf of leaves(doc)) {
        const used = USED_LEAVES.some((pattern) => pattern.test(leaf));
        const covered = warned.some((path) => leaf === path || leaf.startsWith(`${path}.`));
        assert.ok(used || covered, `${leaf} is neither used nor warned about`);
      }
      for (const warning of warnings) assert.match(warning, /^[\w.-]+: ignored: \S/, 'a warning names the field path and why');
    });
  }

  test('without any etcd installed, the kubeadm version is kept and the note says so', () => {
    const { manifest, notes } = convert(fixture('quick-start-v1beta1.yaml'), []);
    assert.equal(manifest.spec.version, '3.5.24');
    assert.match(notes[0]!, /no etcd is installed here/);
  });

  test('spec.version becomes spec.kubernetes.version: the release when installed, else the installed patch of its minor', () => {
    const exact = convertKubeadmControlPlane(fixture('scale-in-v1beta2.yaml'), ['3.6.17'], ['1.33.9', '1.34.1']);
    assert.equal(exact.manifest.spec.kubernetes?.version, '1.34.1');
    assert.match(exact.notes[1]!, /^kubernetes: v1\.34\.1 -> 1\.34\.1 \(installed\)/);
    const patch = convertKubeadmControlPlane(fixture('scale-in-v1beta2.yaml'), ['3.6.17'], ['1.34.7', '1.35.0']);
    assert.equal(patch.manifest.spec.kubernetes?.version, '1.34.7');
    assert.match(patch.notes[1]!, /the installed patch of 1\.34/);
  });

  test('a Kubernetes minor not built here converts to etcd only, and the note says how to build it', () => {
    const { manifest, notes } = convertKubeadmControlPlane(fixture('scale-in-v1beta2.yaml'), ['3.6.17'], ['1.36.3']);
    assert.equal(manifest.spec.kubernetes, undefined);
    assert.match(notes[1]!, /Kubernetes 1\.34 is not built here \(found: 1\.36\.3\): etcd only; `bash scripts\/install-kubernetes\.sh 1\.34`/);
  });

  test('zero seconds stay a duration fastplane reads', () => {
    const doc = withField(fixture('scale-in-v1beta2.yaml'), 'spec.remediation.retryPeriodSeconds', 0);
    assert.equal(convert(doc).manifest.spec.remediation.retryPeriod, '0s');
  });

  test('replicas default to 1 as in KCP', () => {
    assert.equal(convert(withField(fixture('quick-start-v1beta2.yaml'), 'spec.replicas', undefined)).manifest.spec.replicas, 1);
  });

  test('a percentage maxSurge rounds up against replicas', () => {
    const doc = withField(fixture('quick-start-v1beta1.yaml'), 'spec.rolloutStrategy', { type: 'RollingUpdate', rollingUpdate: { maxSurge: '50%' } });
    assert.equal(convert(doc).manifest.spec.rollout.maxSurge, 2);
  });
});

describe('KubeadmControlPlane: invalid manifests name the field path in the KubeadmControlPlane', () => {
  const v1 = () => fixture('quick-start-v1beta1.yaml');
  const v2 = () => fixture('quick-start-v1beta2.yaml');
  const cases: { name: string; doc: () => Record<string, unknown>; says: RegExp }[] = [
    { name: 'even replicas', doc: () => withField(v2(), 'spec.replicas', 4), says: /^spec\.replicas: must be odd with stacked etcd.*got 4$/ },
    { name: 'too many replicas', doc: () => withField(v1(), 'spec.replicas', 11), says: /^spec\.replicas: must be at most 9$/ },
    { name: 'replicas as text', doc: () => withField(v1(), 'spec.replicas', 'three'), says: /^spec\.replicas: must be a whole number$/ },
    { name: 'no version', doc: () => withField(v2(), 'spec.version', undefined), says: /^spec\.version: is required/ },
    { name: 'malformed version', doc: () => withField(v1(), 'spec.version', 'latest'), says: /^spec\.version: must be a Kubernetes version/ },
    { name: 'a v1beta1 field in v1beta2', doc: () => withField(v2(), 'spec.rolloutStrategy', { type: 'RollingUpdate' }), says: /^spec\.rolloutStrategy: not a field of KubeadmControlPlane v1beta2 \(.*spec\.rollout\.strategy\)$/ },
    { name: 'a v1beta2 field in v1beta1', doc: () => withField(v1(), 'spec.remediation', { maxRetry: 1 }), says: /^spec\.remediation: not a field of KubeadmControlPlane v1beta1 \(.*remediationStrategy\)$/ },
    { name: 'a misspelt field', doc: () => withField(v1(), 'spec.replica', 3), says: /^spec\.replica: not a field of KubeadmControlPlane v1beta1$/ },
    { name: 'external etcd', doc: () => withField(v1(), 'spec.kubeadmConfigSpec.clusterConfiguration.etcd.external', { endpoints: ['https://10.0.0.1:2379'] }), says: /^spec\.kubeadmConfigSpec\.clusterConfiguration\.etcd\.external: external etcd/ },
    { name: 'a bad image tag', doc: () => withField(v1(), 'spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag', 'latest'), says: /^spec\.kubeadmConfigSpec\.clusterConfiguration\.etcd\.local\.imageTag: must be an etcd image tag/ },
    { name: 'v1beta1 extraArgs as a list', doc: () => withField(v1(), 'spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.extraArgs', [{ name: 'a', value: 'b' }]), says: /extraArgs: must be a map/ },
    { name: 'v1beta2 extraArgs as a map', doc: () => withField(v2(), 'spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.extraArgs', { a: 'b' }), says: /extraArgs: must be a list of \{ name, value \}/ },
    { name: 'max-learners not a number', doc: () => withField(v1(), 'spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.extraArgs', { 'max-learners': 'many' }), says: /extraArgs\.max-learners: must be a whole number from 1 to 8, got many/ },
    { name: 'a bad retryPeriod', doc: () => withField(v1(), 'spec.remediationStrategy', { retryPeriod: 'soon' }), says: /^spec\.remediationStrategy\.retryPeriod: must be a duration/ },
    { name: 'negative retryPeriodSeconds', doc: () => withField(v2(), 'spec.remediation', { retryPeriodSeconds: -1 }), says: /^spec\.remediation\.retryPeriodSeconds: must be at least 0$/ },
    { name: 'an unknown rollout strategy', doc: () => withField(v2(), 'spec.rollout.strategy.type', 'OnDelete'), says: /^spec\.rollout\.strategy\.type: must be RollingUpdate/ },
    { name: 'maxSurge 0 with one replica', doc: () => withField(withField(v2(), 'spec.replicas', 1), 'spec.rollout.strategy.rollingUpdate.maxSurge', 0), says: /^spec\.rollout\.strategy\.rollingUpdate\.maxSurge: 0 \(remove before add\) needs at least 3 replicas/ },
    { name: 'a maxSurge that is not a count', doc: () => withField(v1(), 'spec.rolloutStrategy', { rollingUpdate: { maxSurge: 'one' } }), says: /^spec\.rolloutStrategy\.rollingUpdate\.maxSurge: must be a whole number or a percentage/ },
    { name: 'a name fastplane cannot use', doc: () => withField(v1(), 'metadata.name', 'Capi.Quickstart'), says: /^metadata\.name: must be a DNS label/ },
    { name: 'an unknown API version', doc: () => withField(v1(), 'apiVersion', 'controlplane.cluster.x-k8s.io/v1alpha4'), says: /^apiVersion: a KubeadmControlPlane must be .*v1beta1 or .*v1beta2, got .*v1alpha4$/ },
  ];
  for (const c of cases) {
    test(c.name, () => {
      const problems = problemsOf(() => convert(c.doc()));
      assert.ok(problems.some((p) => c.says.test(p)), `got:\n${problems.join('\n')}`);
    });
  }
});

describe("kubeadm's etcd for a Kubernetes version, and the nearest installed", () => {
  test('every Kubernetes minor in the table maps to the row for it', () => {
    for (const row of KUBEADM_ETCD_VERSIONS) assert.equal(etcdForKubernetes(`v1.${String(row.minor)}.3`).etcd, row.etcd);
  });

  // kubeadm 1.36's SupportedEtcdVersion (cmd/kubeadm/app/constants/constants.go): 34, 35 and 36 all
  // "3.6.9-0". With what scripts/install-etcd.sh installs, each runs on the 3.6 built here.
  test('Kubernetes 1.34, 1.35 and 1.36 run etcd 3.6, as kubeadm 1.36 deploys; converted, on the installed 3.6', () => {
    const installed = ['3.4.23', '3.5.16', '3.5.30', '3.5.36', '3.6.17', '3.7.4'];
    for (const kubernetes of ['v1.34.0', 'v1.35.4', 'v1.36.1']) {
      assert.equal(etcdForKubernetes(kubernetes).etcd, '3.6.9', kubernetes);
      assert.equal(nearestInstalled(etcdForKubernetes(kubernetes).etcd, installed), '3.6.17', kubernetes);
    }
    assert.equal(nearestInstalled(etcdForKubernetes('v1.33.2').etcd, installed), '3.5.30', '1.33 stays on 3.5 (kubeadm: 3.5.24)');
  });

  test('minors outside the table fall back to the nearest row, as kubeadm does', () => {
    assert.equal(etcdForKubernetes('v1.10.0').etcd, KUBEADM_ETCD_VERSIONS[0]!.etcd);
    assert.equal(etcdForKubernetes('1.99.0').etcd, KUBEADM_ETCD_VERSIONS[KUBEADM_ETCD_VERSIONS.length - 1]!.etcd);
    assert.match(etcdForKubernetes('1.99.0').how, /outside kubeadm's table/);
  });

  test('nearest installed: same minor line first, then the nearest line, the lower on a tie', () => {
    assert.equal(nearestInstalled('3.5.24', ['3.4.23', '3.5.16']), '3.5.16');
    assert.equal(nearestInstalled('3.4.13', ['3.4.23', '3.5.16']), '3.4.23');
    assert.equal(nearestInstalled('3.6.9', ['3.4.23', '3.5.16']), '3.5.16');
    assert.equal(nearestInstalled('3.5.10', ['3.5.8', '3.5.12']), '3.5.8');
    assert.equal(nearestInstalled('3.5.4', ['3.4.23', '3.6.0']), '3.4.23');
    assert.equal(nearestInstalled('3.5.16', ['3.5.16', '3.6.9']), '3.5.16');
    assert.equal(nearestInstalled('3.5.16', []), undefined);
  });
});

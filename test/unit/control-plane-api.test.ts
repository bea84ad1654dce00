import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import {
  API_VERSION,
  compareVersions,
  defaultControlPlane,
  KIND,
  loadControlPlaneFile,
  parseControlPlane,
  validateControlPlane,
  type ControlPlane,
} from '../../src/api/control-plane.ts';
import { InvalidInputError } from '../../src/api/errors.ts';
import { problemsOf } from '../support/problems.ts';

const DEFAULT_SPEC: ControlPlane['spec'] = {
  replicas: 3,
  version: '3.6.17',
  provider: { name: 'local-process', provisioningDelay: '0s', deletionDelay: '0s', failureDomains: [], insecure: false },
  scaleUp: { strategy: 'parallel', maxConcurrentProvisioning: 10 },
  etcd: { maxLearners: 'auto', reconfigurationCheck: 'etcd' },
  rollout: { maxSurge: 1 },
  remediation: { maxRetry: 5, retryPeriod: '0s', minHealthyPeriod: '1h', unhealthyAfter: '10s', learnerStuckAfter: '2m' },
  maintenance: { every: '24h', retainRevisions: 10_000, fragmentationThreshold: 0.5 },
};

function manifest(spec?: Record<string, unknown>, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { apiVersion: API_VERSION, kind: KIND, metadata: { name: 't' }, ...(spec ? { spec } : {}), ...extra };
}

describe('ControlPlane manifest: defaults', () => {
  test('applies every default to a manifest with only a name', () => {
    const cp = validateControlPlane(manifest());
    assert.deepEqual(cp, { apiVersion: API_VERSION, kind: KIND, metadata: { name: 't' }, spec: DEFAULT_SPEC });
    assert.deepEqual(defaultControlPlane('t'), cp);
  });

  test('keeps given fields and fills the rest of each section', () => {
    const cp = validateControlPlane(manifest({ replicas: 5, scaleUp: { strategy: 'serial' }, remediation: { maxRetry: 2 } }));
    assert.equal(cp.spec.replicas, 5);
    assert.deepEqual(cp.spec.scaleUp, { strategy: 'serial', maxConcurrentProvisioning: 10 });
    assert.deepEqual(cp.spec.remediation, { ...DEFAULT_SPEC.remediation, maxRetry: 2 });
    assert.deepEqual(cp.spec.provider, DEFAULT_SPEC.provider);
    assert.equal(cp.spec.version, '3.6.17');
  });

  test('defaults are fresh copies, not shared between manifests', () => {
    // Changing one manifest (e.g. a flag override) must not change the defaults of the next one.
    const a = defaultControlPlane('a');
    a.spec.provider.provisioningDelay = '9s';
    a.spec.etcd.maxLearners = 2;
    a.spec.provider.failureDomains.push('zone-a');
    const b = defaultControlPlane('b');
    assert.equal(b.spec.provider.provisioningDelay, '0s');
    assert.equal(b.spec.etcd.maxLearners, 'auto');
    assert.deepEqual(b.spec.provider.failureDomains, []);
  });
});

describe('ControlPlane manifest: refusals name the field and the rule', () => {
  const cases: { name: string; input: Record<string, unknown>; problems: string[] }[] = [
    { name: 'even replicas', input: manifest({ replicas: 4 }), problems: ['spec.replicas: must be odd, got 4'] },
    { name: 'fractional replicas', input: manifest({ replicas: 2.5 }), problems: ['spec.replicas: must be a whole number'] },
    { name: 'replicas as text', input: manifest({ replicas: 'three' }), problems: ['spec.replicas: must be a whole number'] },
    { name: 'too many replicas', input: manifest({ replicas: 11 }), problems: ['spec.replicas: must be at most 9'] },
    { name: 'version not x.y.z', input: manifest({ version: '3.4' }), problems: ['spec.version: must be an etcd version such as 3.4.23'] },
    { name: 'unknown strategy', input: manifest({ scaleUp: { strategy: 'fast' } }), problems: ['spec.scaleUp.strategy: must be parallel or serial'] },
    { name: 'unknown provider', input: manifest({ provider: { name: 'aws' } }), problems: ['spec.provider.name: unknown provider; known: local-process, ssh'] },
    {
      name: 'reversed provisioning range',
      input: manifest({ provider: { provisioningDelay: '9s-3s' } }),
      problems: ['spec.provider.provisioningDelay: must be a duration (8s) or a range (3s-8s) with min <= max'],
    },
    {
      name: 'deletion delay not a duration',
      input: manifest({ provider: { deletionDelay: 'soon' } }),
      problems: ['spec.provider.deletionDelay: must be a duration (8s) or a range (3s-8s) with min <= max'],
    },
    {
      name: 'repeated failure domain',
      input: manifest({ provider: { failureDomains: ['a', 'a'] } }),
      problems: ['spec.provider.failureDomains: must not repeat a failure domain'],
    },
    { name: 'failure domain not a DNS label', input: manifest({ provider: { failureDomains: ['Zone_A'] } }), problems: ['spec.provider.failureDomains.0: must be a DNS label'] },
    { name: 'insecure not a boolean', input: manifest({ provider: { insecure: 'yes' } }), problems: ['spec.provider.insecure: must be true or false'] },
    {
      name: 'duration without unit',
      input: manifest({ remediation: { unhealthyAfter: '10' } }),
      problems: ['spec.remediation.unhealthyAfter: unhealthyAfter must be a duration such as 500ms, 8s or 2m'],
    },
    {
      name: 'maxLearners above 1 on etcd 3.4',
      input: manifest({ version: '3.4.23', etcd: { maxLearners: 2 } }),
      problems: ['spec.etcd.maxLearners: above 1 needs etcd 3.6 or later (--max-learners), got version 3.4.23'],
    },
    {
      name: 'maxLearners above 1 on etcd 3.5',
      input: manifest({ version: '3.5.16', etcd: { maxLearners: 3 } }),
      problems: ['spec.etcd.maxLearners: above 1 needs etcd 3.6 or later (--max-learners), got version 3.5.16'],
    },
    {
      name: 'maxSurge 0 with 1 replica',
      input: manifest({ replicas: 1, rollout: { maxSurge: 0 } }),
      problems: ['spec.rollout.maxSurge: 0 (remove before add) needs at least 3 replicas, got 1'],
    },
    { name: 'wrong apiVersion and kind', input: manifest(undefined, { apiVersion: 'v1', kind: 'Pod' }), problems: ['apiVersion: must be fastplane.dev/v1alpha1', 'kind: must be ControlPlane'] },
    { name: 'missing name', input: manifest(undefined, { metadata: {} }), problems: ['metadata.name: is required'] },
    { name: 'name too long', input: manifest(undefined, { metadata: { name: 'a'.repeat(41) } }), problems: ['metadata.name: must be at most 40 characters'] },
    { name: 'unknown top-level field', input: manifest(undefined, { status: {} }), problems: ['Unrecognized key: "status"'] },
    { name: 'unknown spec field', input: manifest({ replica: 3 }), problems: ['spec: Unrecognized key: "replica"'] },
    { name: 'unknown nested field', input: manifest({ provider: { region: 'eu' } }), problems: ['spec.provider: Unrecognized key: "region"'] },
    { name: 'unknown metadata field', input: manifest(undefined, { metadata: { name: 't', labels: {} } }), problems: ['metadata: Unrecognized key: "labels"'] },
  ];
  for (const c of cases) {
    test(`refuses ${c.name}`, () => {
      assert.deepEqual(problemsOf(() => validateControlPlane(c.input)), c.problems);
    });
  }

  test('refuses names that are not DNS labels', () => {
    for (const name of ['Bad_Name', 'UPPER', '-lead', 'trail-', 'a.b', 'has space', '']) {
      const problems = problemsOf(() => validateControlPlane(manifest(undefined, { metadata: { name } })));
      assert.deepEqual(problems, ['metadata.name: must be a DNS label (lower-case letters, digits and -)'], JSON.stringify(name));
    }
    for (const name of ['a', 'prod-1', 'a'.repeat(40), '9lives']) assert.equal(validateControlPlane(manifest(undefined, { metadata: { name } })).metadata.name, name);
  });

  test('reports every problem at once', () => {
    const problems = problemsOf(() => validateControlPlane(manifest({ replicas: 4, etcd: { maxLearners: 2 }, scaleUp: { strategy: 'fast' } })));
    assert.ok(problems.includes('spec.replicas: must be odd, got 4'), problems.join('\n'));
    assert.ok(problems.includes('spec.scaleUp.strategy: must be parallel or serial'), problems.join('\n'));
    assert.ok(problems.length >= 2);
  });

  test('InvalidInputError carries the problems and joins them in its message', () => {
    let error: unknown;
    try {
      validateControlPlane(manifest({ replicas: 4, version: 'x' }));
    } catch (e) {
      error = e;
    }
    assert.ok(error instanceof InvalidInputError);
    assert.equal(error.name, 'InvalidInputError');
    assert.equal(error.message, error.problems.join('\n'));
    assert.equal(error.problems.length, 2);
  });

  test('accepts the limits at their edges', () => {
    assert.equal(validateControlPlane(manifest({ version: '3.6.0', etcd: { maxLearners: 2 } })).spec.etcd.maxLearners, 2);
    assert.equal(validateControlPlane(manifest({ replicas: 3, rollout: { maxSurge: 0 } })).spec.rollout.maxSurge, 0);
    assert.equal(validateControlPlane(manifest({ replicas: 1 })).spec.replicas, 1);
    assert.equal(validateControlPlane(manifest({ replicas: 9 })).spec.replicas, 9);
    assert.equal(validateControlPlane(manifest({ provider: { provisioningDelay: '3s-8s' } })).spec.provider.provisioningDelay, '3s-8s');
    assert.equal(validateControlPlane(manifest({ provider: { provisioningDelay: '3s-3s' } })).spec.provider.provisioningDelay, '3s-3s');
  });
});

describe('ControlPlane manifest: text', () => {
  const YAML_TEXT = [
    `apiVersion: ${API_VERSION}`,
    `kind: ${KIND}`,
    'metadata:',
    '  name: prod',
    'spec:',
    '  replicas: 5',
    '  provider:',
    '    provisioningDelay: 3s-8s',
    '    failureDomains: [a, b, c]',
    '',
  ].join('\n');

  test('parses YAML', () => {
    const cp = parseControlPlane(YAML_TEXT);
    assert.equal(cp.metadata.name, 'prod');
    assert.equal(cp.spec.replicas, 5);
    assert.deepEqual(cp.spec.provider.failureDomains, ['a', 'b', 'c']);
    assert.equal(cp.spec.scaleUp.strategy, 'parallel');
  });

  test('accepts JSON', () => {
    const json = JSON.stringify({ apiVersion: API_VERSION, kind: KIND, metadata: { name: 'j' }, spec: { replicas: 7, version: '3.5.16' } });
    const cp = parseControlPlane(json);
    assert.equal(cp.metadata.name, 'j');
    assert.equal(cp.spec.replicas, 7);
    assert.equal(cp.spec.version, '3.5.16');
    assert.deepEqual(cp.spec.remediation, DEFAULT_SPEC.remediation);
  });

  test('a YAML syntax error names the source and the position', () => {
    const problems = problemsOf(() => parseControlPlane('apiVersion: [\n', 'cp.yaml'));
    assert.equal(problems.length, 1);
    assert.match(problems[0]!, /^cp\.yaml: not valid YAML or JSON: /);
    assert.match(problems[0]!, /at line \d+, column \d+/);
    const bad = problemsOf(() => parseControlPlane('{"apiVersion": "x",'));
    assert.match(bad[0]!, /^manifest: not valid YAML or JSON: /);
  });

  test('a document that is not a mapping is refused', () => {
    for (const text of ['', '- a\n- b\n', '42', 'just text']) {
      assert.deepEqual(problemsOf(() => parseControlPlane(text)), ['manifest: must be a mapping with apiVersion, kind, metadata and spec'], JSON.stringify(text));
    }
  });

  test('schema problems in text are reported like object problems', () => {
    assert.deepEqual(
      problemsOf(() => parseControlPlane(YAML_TEXT.replace('replicas: 5', 'replicas: 4'))),
      ['spec.replicas: must be odd, got 4'],
    );
  });

  test('loads a manifest file and names an unreadable one', () => {
    const dir = mkdtempSync(join(tmpdir(), 'fastplane-api-'));
    try {
      const file = join(dir, 'cp.yaml');
      writeFileSync(file, YAML_TEXT);
      assert.equal(loadControlPlaneFile(file).metadata.name, 'prod');
      const missing = join(dir, 'missing.yaml');
      assert.deepEqual(problemsOf(() => loadControlPlaneFile(missing)), [`${missing}: cannot read the manifest (ENOENT)`]);
      const broken = join(dir, 'broken.yaml');
      writeFileSync(broken, 'spec: [\n');
      assert.match(problemsOf(() => loadControlPlaneFile(broken))[0]!, new RegExp(`^${broken.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: not valid YAML or JSON`));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('compareVersions', () => {
  test('orders dotted numeric versions numerically', () => {
    assert.ok(compareVersions('3.4.23', '3.5.16') < 0);
    assert.ok(compareVersions('3.5.16', '3.6.0') < 0);
    assert.ok(compareVersions('3.10.0', '3.9.9') > 0, 'numeric, not lexical');
    assert.equal(compareVersions('3.6.0', '3.6.0'), 0);
    assert.equal(compareVersions('3.6', '3.6.0'), 0);
  });
});

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runInNewContext } from 'node:vm';
import { after, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';
import { describeIssues, RULE_MESSAGES, ControlPlaneSchema } from '../../src/api/control-plane.ts';
import { cliMessageAt, controlPlaneCrd, CRD_NAME, renderCrds } from '../../src/api/crd.ts';
import { celDecimal, celMessage } from '../../src/api/crd-rules.ts';
import { SSH_MESSAGES } from '../../src/api/ssh-provider.ts';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const CHECKED_IN = join(ROOT, 'deploy/crds/controlplanes.fastplane.dev.yaml');

type Node = Record<string, unknown>;
interface Rule {
  rule: string;
  message?: string;
  messageExpression?: string;
  fieldPath?: string;
}

const crd = controlPlaneCrd() as { spec: { versions: { schema: { openAPIV3Schema: Node }; subresources: Node; additionalPrinterColumns: { name: string; jsonPath: string }[] }[]; names: Node; scope: string } };
const version = crd.spec.versions[0];
assert.ok(version);
const root = version.schema.openAPIV3Schema;

/** Every schema node with its dotted path (`[]` for items, `{}` for map values). */
function nodes(node: Node, path = ''): [string, Node][] {
  const children: [string, Node][] = [
    ...Object.entries((node.properties ?? {}) as Record<string, Node>).map(([key, child]): [string, Node] => [path === '' ? key : `${path}.${key}`, child]),
    ...(node.items === undefined ? [] : [[`${path}[]`, node.items as Node] as [string, Node]]),
    ...(typeof node.additionalProperties === 'object' ? [[`${path}{}`, node.additionalProperties as Node] as [string, Node]] : []),
  ];
  return [[path, node], ...children.flatMap(([childPath, child]) => nodes(child, childPath))];
}

const at = (path: string): Node => {
  const found = nodes(root).find(([p]) => p === path)?.[1];
  assert.ok(found, `${path} is in the schema`);
  return found;
};
const rulesAt = (path: string): Rule[] => (at(path)['x-kubernetes-validations'] ?? []) as Rule[];

/** A CEL messageExpression made only of string literals (maybe in parentheses) joined by +, evaluated. */
function evaluateConcatenation(expression: string): string {
  const term = /(?:^|\s\+\s)\(?'((?:[^'\\]|\\.)*)'\)?/y;
  let out = '';
  while (term.lastIndex < expression.length) {
    const match = term.exec(expression);
    assert.ok(match, `a literal at ${String(term.lastIndex)} of ${expression}`);
    out += (match[1] ?? '').replace(/\\(.)/g, '$1');
  }
  return out;
}

/** What the CLI prints for a spec, field path first, as describeIssues says it. */
function cliSays(spec: Node): string[] {
  const result = ControlPlaneSchema.safeParse({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name: 'x' }, spec });
  return result.success ? [] : describeIssues(result.error);
}

describe('the ControlPlane CRD generated from the manifest schema', () => {
  test('is structural: every node typed, no additionalProperties beside properties, no JSON Schema keywords Kubernetes refuses', () => {
    for (const [path, node] of nodes(root)) {
      assert.ok(typeof node.type === 'string' || node['x-kubernetes-int-or-string'] === true, `${path || '<root>'} has a type`);
      assert.ok(!(node.properties !== undefined && node.additionalProperties !== undefined), `${path}: properties and additionalProperties`);
      for (const keyword of ['anyOf', 'oneOf', 'allOf', 'const', '$schema', 'propertyNames', '$ref', '$defs']) assert.ok(!(keyword in node), `${path}: ${keyword}`);
      if ('exclusiveMinimum' in node) assert.equal(typeof node.exclusiveMinimum, 'boolean', `${path}: OpenAPI v3.0's boolean exclusiveMinimum`);
    }
  });

  test("keeps the schema's limits, defaults and descriptions", () => {
    assert.deepEqual([at('spec.replicas').minimum, at('spec.replicas').maximum, at('spec.replicas').default], [1, 9, 3]);
    assert.equal(at('spec.version').pattern, '^\\d+\\.\\d+\\.\\d+$');
    assert.deepEqual(at('spec.kubernetes').required, ['version']);
    assert.equal(at('spec.etcd.maxLearners')['x-kubernetes-int-or-string'], true);
    assert.equal(at('spec.maintenance.fragmentationThreshold').exclusiveMinimum, true);
    assert.equal(at('spec.provider.failureDomains')['x-kubernetes-list-type'], 'set');
    assert.deepEqual(at('spec.provider.hosts')['x-kubernetes-list-map-keys'], ['address', 'port']);
    // The spec's default is each field's, so an object with no spec passes the spec's own rules.
    assert.deepEqual(Object.keys(at('spec').default as Node).sort(), ['etcd', 'maintenance', 'provider', 'remediation', 'replicas', 'rollout', 'scaleUp']);
    for (const [path, node] of nodes(root).filter(([p]) => p.startsWith('spec.') || p.startsWith('status.'))) {
      if (!path.endsWith('[]') && !path.endsWith('{}') && !path.startsWith('status.conditions')) assert.ok(typeof node.description === 'string' && node.description.length > 0, `${path} has a description for kubectl explain`);
    }
  });

  test('an enum is a CEL rule with the CLI words, not an OpenAPI enum that would stop every CEL rule', () => {
    for (const [path, node] of nodes(root).filter(([p]) => p.startsWith('spec'))) assert.ok(!('enum' in node), `${path}: OpenAPI enum`);
    assert.deepEqual(rulesAt('spec.provider.name'), [{ rule: "self in ['local-process', 'ssh']", message: 'unknown provider; known: local-process, ssh' }]);
    assert.deepEqual(cliSays({ provider: { name: 'cloud' } }), ['spec.provider.name: unknown provider; known: local-process, ssh']);
  });

  test('the cross-field rules are CEL rules reported at the field the CLI names', () => {
    const bySpec = rulesAt('spec');
    const fieldPaths = bySpec.map((rule) => rule.fieldPath);
    for (const path of ['.etcd.maxLearners', '.kubernetes', '.rollout.maxSurge', '.provider.hosts', '.provider.endpoint']) assert.ok(fieldPaths.includes(path), `a spec rule reports at ${path}`);
    assert.equal(fieldPaths.filter((path) => path === '.kubernetes').length, 1, 'insecure');
    assert.equal(fieldPaths.filter((path) => path === '.provider.endpoint').length, 2, 'an ssh endpoint exactly with Kubernetes');
    assert.ok(rulesAt('spec.replicas').some((rule) => rule.rule === 'self % 2 == 1'));
    const provider = rulesAt('spec.provider').map((rule) => rule.fieldPath);
    for (const field of ['.hosts', '.identityFile', '.knownHostsFile', '.provision']) assert.ok(provider.includes(field), `provider rule at ${field}`);
    for (const rule of [...bySpec, ...rulesAt('spec.replicas')]) assert.ok(rule.message !== undefined || rule.messageExpression !== undefined, rule.rule);
  });

  test('fixed messages are the words the CLI prints for a value the rule refuses', () => {
    assert.equal(rulesAt('spec.remediation.retryPeriod')[0]?.message, 'retryPeriod must be a duration such as 500ms, 8s or 2m');
    assert.equal(rulesAt('spec.backup.every')[0]?.message, 'every must be a duration of 1s or more, such as 30m or 6h');
    assert.deepEqual(cliSays({ backup: { every: '500ms' } }), ['spec.backup.every: every must be a duration of 1s or more, such as 30m or 6h']);
    assert.equal(cliMessageAt('spec.scaleUp.strategy', 'fast'), 'must be parallel or serial');
    assert.throws(() => cliMessageAt('spec.replicas', 3), /accepts 3 at spec.replicas/);
  });

  test('a message with values is the template the CLI fills, with CEL values in place', () => {
    assert.equal(evaluateConcatenation(celMessage(RULE_MESSAGES.odd, "'4'")), RULE_MESSAGES.odd('4'));
    assert.equal(evaluateConcatenation(celMessage(SSH_MESSAGES.hostCount, "'5'", "'2'")), 'needs at least replicas + rollout.maxSurge = 5 hosts, got 2');
    assert.equal(evaluateConcatenation(celMessage((v: string) => `it's a \\ ${v} '`, "'x'")), "it's a \\ x '");
    assert.deepEqual(cliSays({ replicas: 1, rollout: { maxSurge: 0 } }), [`spec.rollout.maxSurge: ${RULE_MESSAGES.surgeNeedsReplicas('1')}`]);
  });

  test('celDecimal spells 0 to 999 as CEL would (integer division)', () => {
    // The expression is JavaScript too, once CEL's integer division is made explicit.
    const js = celDecimal('n').replace(/n \/ (\d+)/g, 'Math.trunc(n / $1)');
    for (const n of [0, 7, 10, 42, 99, 100, 305, 999]) assert.equal(runInNewContext(js, { n, Math }), String(n));
  });

  test("the CLI's name rules sit on the object, as a maxLength would stop the CEL rules", () => {
    assert.deepEqual(
      (root['x-kubernetes-validations'] as Rule[]).map((rule) => [rule.fieldPath, rule.message]),
      [
        ['.metadata.name', 'must be at most 40 characters'],
        ['.metadata.name', 'must be a DNS label (lower-case letters, digits and -)'],
      ],
    );
  });

  test('subresources, printer columns, names and scope', () => {
    assert.equal(CRD_NAME, 'controlplanes.fastplane.dev');
    assert.deepEqual(version.subresources, { status: {}, scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas' } });
    assert.deepEqual(
      version.additionalPrinterColumns.map((c) => c.name),
      ['Replicas', 'Ready', 'Voters', 'Learners', 'Version', 'Available', 'Age'],
    );
    assert.deepEqual(crd.spec.names.shortNames, ['fcp']);
    assert.equal(crd.spec.scope, 'Namespaced');
    assert.deepEqual(parse(renderCrds()), crd);
  });
});

describe('the checked-in CRD', () => {
  const dir = mkdtempSync(join(tmpdir(), 'fastplane-crd-'));
  after(() => { rmSync(dir, { recursive: true, force: true }); });
  const script = (...args: string[]) => spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'scripts/crds.ts'), ...args], { cwd: ROOT, encoding: 'utf8' });

  test('is current (scripts/crds.ts --check), and --check fails on a stale copy', () => {
    const current = script('--check');
    assert.equal(current.status, 0, current.stderr);
    const stale = join(dir, 'stale.yaml');
    writeFileSync(stale, readFileSync(CHECKED_IN, 'utf8').replace('must be odd, got', 'must be uneven, got'));
    const failed = script('--check', '--file', stale);
    assert.equal(failed.status, 1);
    assert.match(failed.stderr, /stale: run npx tsx scripts\/crds\.ts/);
  });

  test('is what fastplane crds prints', () => {
    const printed = spawnSync(process.execPath, ['--import', 'tsx', join(ROOT, 'src/cli/main.ts'), '--state-dir', dir, 'crds'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(printed.status, 0, printed.stderr);
    assert.equal(printed.stdout, readFileSync(CHECKED_IN, 'utf8'));
  });
});

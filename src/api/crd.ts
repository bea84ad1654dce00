import { stringify } from 'yaml';
import { z } from 'zod';
import { API_VERSION, ControlPlaneSchema, KIND } from './control-plane.ts';
import { ControlPlaneStatusSchema } from './control-plane-status.ts';
import { CEL_RULES, celString, type CelRule, type ProbedRule } from './crd-rules.ts';

/**
 * The ControlPlane CustomResourceDefinition, generated from the zod schema the manifests are
 * validated with: zod's JSON Schema made structural (docs/crds.md), its limits repeated as CEL rules
 * that say the CLI's words, and the refinements of src/api/crd-rules.ts.
 */

export const CRD_GROUP = API_VERSION.split('/')[0] ?? '';
export const CRD_VERSION = API_VERSION.split('/')[1] ?? '';
export const CRD_PLURAL = 'controlplanes';
export const CRD_NAME = `${CRD_PLURAL}.${CRD_GROUP}`;
export const CRD_SHORT_NAME = 'fcp';

type Schema = Record<string, unknown>;

/** Where kubectl apply and the CLI agree on identity: a list that is a set, or a map keyed by fields. */
const LIST_TYPES: Readonly<Record<string, Schema>> = {
  'spec.provider.failureDomains': { 'x-kubernetes-list-type': 'set' },
  'spec.provider.hosts': { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['address', 'port'] },
  'status.conditions': { 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] },
};

/** What the CLI says when the value at `path` (dotted, `[]` for an item, `{}` for a map value) is `value`. */
export function cliMessageAt(path: string, value: unknown): string {
  const segments = path.split('.').flatMap((segment) => (segment.endsWith('[]') ? [segment.slice(0, -2), 0] : segment.endsWith('{}') ? [segment.slice(0, -2), 'key'] : [segment]));
  const doc: Schema = { apiVersion: API_VERSION, kind: KIND, metadata: { name: 'probe' } };
  let node: Record<string | number, unknown> = doc;
  segments.forEach((segment, i) => {
    const next = segments[i + 1];
    if (next === undefined) node[segment] = value;
    else node = (node[segment] ??= typeof next === 'number' ? [] : {}) as Record<string | number, unknown>;
  });
  const result = ControlPlaneSchema.safeParse(doc);
  const wanted = segments.join('.');
  const issue = result.error?.issues.find((candidate) => candidate.path.map(String).join('.') === wanted);
  if (issue === undefined) throw new Error(`the schema accepts ${JSON.stringify(value)} at ${path}: no message to read`);
  return issue.message;
}

/** A value that breaks `pattern`. */
function breaking(pattern: string): string {
  const found = ['', '!', ' ', '-'].find((candidate) => !new RegExp(pattern).test(candidate));
  if (found === undefined) throw new Error(`no probe breaks /${pattern}/`);
  return found;
}

/**
 * The node's limits as CEL rules that refuse what the limit refuses, each with the CLI's words for it.
 * A maxLength stays OpenAPI's alone: its violation stops the API server before any CEL rule runs.
 */
function limitRules(node: Schema): ProbedRule[] {
  if (Array.isArray(node.anyOf)) {
    // An int-or-string: each branch's limits, for values of its type.
    return (node.anyOf as Schema[]).flatMap((branch) => {
      const type = branch.type === 'integer' ? 'int' : 'string';
      const limits = limitRules('const' in branch ? { enum: [branch.const] } : branch);
      return limits.map(({ rule, probe }) => ({ rule: `type(self) != ${type} || (${rule})`, probe }));
    });
  }
  const rules: ProbedRule[] = [];
  if (Array.isArray(node.enum)) rules.push({ rule: `self in [${node.enum.map((value) => celString(String(value))).join(', ')}]`, probe: `not-${node.enum.join('-')}` });
  if (typeof node.minimum === 'number') rules.push({ rule: `self >= ${String(node.minimum)}`, probe: node.minimum - 1 });
  if (typeof node.exclusiveMinimum === 'number') rules.push({ rule: `self > ${String(node.exclusiveMinimum)}`, probe: node.exclusiveMinimum });
  if (typeof node.maximum === 'number' && node.maximum !== Number.MAX_SAFE_INTEGER) rules.push({ rule: `self <= ${String(node.maximum)}`, probe: node.maximum + 1 });
  if (typeof node.minLength === 'number') rules.push({ rule: `size(self) >= ${String(node.minLength)}`, probe: 'x'.repeat(node.minLength - 1) });
  if (typeof node.pattern === 'string') rules.push({ rule: `self.matches(${celString(node.pattern)})`, probe: breaking(node.pattern) });
  return rules;
}

function withWords(rule: CelRule | ProbedRule, path: string): CelRule {
  if (!('probe' in rule)) return rule;
  return { rule: rule.rule, message: cliMessageAt(path, rule.probe) };
}

/**
 * Turns zod's JSON Schema into a structural one, node by node: every node typed, no
 * `additionalProperties: false` beside `properties` (the API server prunes unknown fields instead), an
 * int-or-string for a union of a word and a number, OpenAPI v3.0's boolean exclusiveMinimum, and the
 * CEL rules of the node.
 */
function structural(node: Schema, path: string, cel: boolean): Schema {
  const { additionalProperties, anyOf, properties, items, exclusiveMinimum, maximum, enum: values, ...rest } = node;
  // No $schema, and no propertyNames: a map's keys are strings anyway.
  const out: Schema = Object.fromEntries(Object.entries(rest).filter(([key]) => key !== '$schema' && key !== 'propertyNames'));
  const rules = cel ? [...limitRules(node), ...(CEL_RULES[path] ?? [])].map((rule) => withWords(rule, path)) : [];
  // A value outside an OpenAPI enum stops the API server before any CEL rule runs, so the CLI's words
  // would never be said: the CEL rule alone holds the enum (docs/crds.md).
  if (values !== undefined && !cel) out.enum = values;
  if (anyOf !== undefined) {
    delete out.type;
    out['x-kubernetes-int-or-string'] = true;
  }
  if (typeof exclusiveMinimum === 'number') Object.assign(out, { minimum: exclusiveMinimum, exclusiveMinimum: true });
  // zod's .int() bounds every integer by Number.MAX_SAFE_INTEGER: no limit a user would set.
  if (typeof maximum === 'number' && maximum !== Number.MAX_SAFE_INTEGER) out.maximum = maximum;
  if (properties !== undefined) {
    out.properties = Object.fromEntries(Object.entries(properties as Record<string, Schema>).map(([key, child]) => [key, structural(child, `${path}.${key}`, cel)]));
  }
  if (items !== undefined) out.items = structural(items as Schema, `${path}[]`, cel);
  if (typeof additionalProperties === 'object') out.additionalProperties = structural(additionalProperties as Schema, `${path}{}`, cel);
  Object.assign(out, LIST_TYPES[path] ?? {});
  if (rules.length > 0) out['x-kubernetes-validations'] = rules;
  return out;
}

/**
 * The CLI's limits on the name (shorter than Kubernetes' own, so machine names stay short), as rules on
 * the object: a rule may read metadata.name only from the root, and a maxLength there would stop every
 * CEL rule before the CLI's words are said.
 */
function nameRules(name: Schema): CelRule[] {
  const { maxLength, pattern } = name;
  if (typeof maxLength !== 'number' || typeof pattern !== 'string') throw new Error('metadata.name has no maxLength or pattern in the schema');
  return [
    { rule: `size(self.metadata.name) <= ${String(maxLength)}`, message: cliMessageAt('metadata.name', 'x'.repeat(maxLength + 1)), fieldPath: '.metadata.name' },
    { rule: `self.metadata.name.matches(${celString(pattern)})`, message: cliMessageAt('metadata.name', breaking(pattern)), fieldPath: '.metadata.name' },
  ];
}

/** The object of a schema's property defaults, for a parent whose default must pass its own rules. */
function defaultsOf(schema: Schema): Schema {
  const properties = (schema.properties ?? {}) as Record<string, Schema>;
  return Object.fromEntries(Object.entries(properties).flatMap(([key, child]) => ('default' in child ? [[key, child.default]] : [])));
}

function objectSchema(): Schema {
  // The input side: what users write, before the spec's transforms fill in what they left out.
  const json = z.toJSONSchema(ControlPlaneSchema, { io: 'input', unrepresentable: 'any' }) as Schema;
  const status = z.toJSONSchema(ControlPlaneStatusSchema, { io: 'input' }) as Schema;
  const properties = json.properties as Record<string, Schema>;
  const spec = structural(properties.spec ?? {}, 'spec', true);
  const name = ((properties.metadata?.properties ?? {}) as Record<string, Schema>).name ?? {};
  return {
    type: 'object',
    description: ControlPlaneSchema.description,
    properties: {
      apiVersion: { type: 'string', description: 'fastplane.dev/v1alpha1' },
      kind: { type: 'string', description: 'ControlPlane' },
      // Only the name: the API server owns the rest of metadata.
      metadata: { type: 'object', properties: { name: { type: 'string' } } },
      // The CLI defaults an absent spec field by field: the same here, one level down (the fields' own defaults hold the rest).
      spec: { ...spec, default: defaultsOf(spec) },
      status: structural(status, 'status', false),
    },
    'x-kubernetes-validations': nameRules(name),
  };
}

const column = (name: string, jsonPath: string, type: 'integer' | 'string' | 'date', description: string): Schema => ({ name, type, jsonPath, description });

/** The CustomResourceDefinition `controlplanes.fastplane.dev`, as an object ready to render. */
export function controlPlaneCrd(): Schema {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: CRD_NAME },
    spec: {
      group: CRD_GROUP,
      names: { kind: KIND, listKind: `${KIND}List`, plural: CRD_PLURAL, singular: KIND.toLowerCase(), shortNames: [CRD_SHORT_NAME], categories: ['fastplane'] },
      scope: 'Namespaced',
      versions: [
        {
          name: CRD_VERSION,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: objectSchema() },
          subresources: { status: {}, scale: { specReplicasPath: '.spec.replicas', statusReplicasPath: '.status.replicas' } },
          additionalPrinterColumns: [
            column('Replicas', '.spec.replicas', 'integer', 'Desired voters'),
            column('Ready', '.status.readyReplicas', 'integer', 'Machines whose member is a healthy voter'),
            column('Voters', '.status.voters', 'integer', 'Voting etcd members'),
            column('Learners', '.status.learners', 'integer', 'etcd learners catching up'),
            column('Version', '.status.version', 'string', 'The etcd version the members run'),
            column('Available', '.status.conditions[?(@.type=="Available")].status', 'string', 'Whether the control plane is available'),
            column('Age', '.metadata.creationTimestamp', 'date', 'Time since creation'),
          ],
        },
      ],
    },
  };
}

/** The CRD as the YAML `fastplane crds` prints and deploy/crds/ holds. */
export function renderCrds(): string {
  return `# Generated from src/api/control-plane.ts by \`npx tsx scripts/crds.ts\`; do not edit.\n${stringify(controlPlaneCrd(), { lineWidth: 0 })}`;
}

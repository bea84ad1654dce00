import { DEFAULT_ETCD, RULE_MESSAGES } from './control-plane.ts';
import { DURATION_SOURCE } from './duration.ts';
import { KUBEADM_ETCD_VERSIONS } from './kcp/etcd-versions.ts';
import { defaultEtcdFor } from './kubernetes.ts';
import { SSH_ADDRESS_FORMS, SSH_MESSAGES, SSH_ONLY_FIELDS } from './ssh-provider.ts';

/**
 * The CEL rules (`x-kubernetes-validations`) of the ControlPlane CRD for what zod checks with
 * refinements: the cross-field rules and the field rules that are code, not limits. A message that
 * names a value is built from the template the CLI prints (RULE_MESSAGES, SSH_MESSAGES) with CEL
 * expressions in place of the values; a fixed one is read from zod itself, by validating `probe` (a
 * value the rule refuses) at the rule's field (src/api/crd.ts).
 */

export interface CelRule {
  rule: string;
  message?: string;
  messageExpression?: string;
  /** Where the API server reports the error, relative to the schema node the rule sits on. */
  fieldPath?: string;
}

/** A rule whose fixed message is what the CLI says of `probe` at the rule's field. */
export interface ProbedRule {
  rule: string;
  probe: unknown;
}

/** A CEL string literal. */
export function celString(text: string): string {
  return `'${text.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

/**
 * A message template filled with CEL expressions: a `messageExpression` that says exactly what the
 * template says for the values the expressions take.
 */
export function celMessage(template: (...values: string[]) => string, ...expressions: string[]): string {
  // Marks no message contains, so the template's own words split from the values.
  const marks = expressions.map((_, i) => `{{${String(i)}}}`);
  const parts = template(...marks).split(/\{\{(\d+)\}\}/);
  const terms = parts.map((part, i) => (i % 2 === 0 ? celString(part) : `(${expressions[Number(part)] ?? ''})`)).filter((term) => term !== "''");
  return terms.join(' + ');
}

const DIGITS = `[${Array.from({ length: 10 }, (_, digit) => celString(String(digit))).join(', ')}]`;

/**
 * A whole number from 0 to 999 in decimal, as CEL: `string(n)` has no size the API server's cost
 * estimate can bound (its result counts as long as a whole request), while a digit picked from a list
 * of literals does. Outside that range the expression fails and the API server says the rule's
 * `message` instead.
 */
export function celDecimal(n: string): string {
  const digit = (of: string): string => `${DIGITS}[${of}]`;
  return `${n} < 10 ? ${digit(n)} : ${n} < 100 ? ${digit(`${n} / 10`)} + ${digit(`${n} % 10`)} : ${digit(`${n} / 100`)} + ${digit(`${n} / 10 % 10`)} + ${digit(`${n} % 10`)}`;
}

/** A rule whose message is a template filled with CEL values (none: a fixed sentence). */
function said(rule: string, template: (...values: string[]) => string, values: string[] = [], fieldPath?: string): CelRule {
  // When a value cannot be said (a number beyond celDecimal), the sentence names it in general.
  const words = values.length === 0 ? { message: template() } : { messageExpression: celMessage(template, ...values), message: template(...values.map(() => 'a value out of range')) };
  return { rule, ...words, ...(fieldPath === undefined ? {} : { fieldPath }) };
}

/** Milliseconds of a duration CEL has already matched against DURATION_SOURCE (`1.5s`, `500ms`). */
function celMilliseconds(text: string): string {
  const unit = `(${text}.endsWith('ms') ? 1.0 : ${text}.endsWith('s') ? 1000.0 : ${text}.endsWith('m') ? 60000.0 : 3600000.0)`;
  return `double(${text}.find('^[0-9]+(\\\\.[0-9]+)?')) * ${unit}`;
}

const DURATION = `^${DURATION_SOURCE}$`;
const RANGE = `^${DURATION_SOURCE}(-${DURATION_SOURCE})?$`;

const durationRule: ProbedRule = { rule: `self.matches(${celString(DURATION)})`, probe: 'soon' };

const everyRule: ProbedRule = { rule: `self.matches(${celString(DURATION)}) && ${celMilliseconds('self')} >= 1000.0`, probe: '0s' };

// Two rules, as one would cost more than the API server allows for a rule; both say the CLI's words.
const rangeRules: ProbedRule[] = [
  { rule: `self.matches(${celString(RANGE)})`, probe: '8 seconds' },
  { rule: `!self.matches(${celString(RANGE)}) || !self.contains('-') || ${celMilliseconds("self.find('^[^-]+')")} <= ${celMilliseconds("self.find('[^-]+$')")}`, probe: '8s-3s' },
];

/**
 * The etcd version the CLI defaults to (control-plane.ts: spec.version, else the one kubeadm pairs
 * with spec.kubernetes.version, else DEFAULT_ETCD), as a CEL expression over the spec: the
 * Kubernetes minors grouped by the etcd they default to, the last group taking every minor above.
 */
function celEtcdVersion(): string {
  const last = KUBEADM_ETCD_VERSIONS[KUBEADM_ETCD_VERSIONS.length - 1]?.minor ?? 0;
  const groups = new Map<string, number[]>();
  for (let minor = 0; minor <= last; minor++) {
    const etcd = defaultEtcdFor(`1.${String(minor)}.0`);
    groups.set(etcd, [...(groups.get(etcd) ?? []), minor]);
  }
  const entries = [...groups.entries()];
  const newest = entries.pop()?.[0] ?? DEFAULT_ETCD;
  const byKubernetes = entries.reduceRight(
    (otherwise, [etcd, minors]) => `self.kubernetes.version.matches(${celString(`^v?[0-9]+\\.(${minors.join('|')})\\.`)}) ? ${celString(etcd)} : ${otherwise}`,
    celString(newest),
  );
  return `has(self.version) ? self.version : !has(self.kubernetes) ? ${celString(DEFAULT_ETCD)} : ${byKubernetes}`;
}

/** etcd 3.6 or later (control-plane.ts compares with compareVersions(version, '3.6.0')). */
const AT_LEAST_3_6 = '^(3\\.([6-9]|[1-9][0-9]+)|[4-9]|[1-9][0-9]+)\\.';

const hostCount = '(has(self.provider.hosts) ? size(self.provider.hosts) : 0)';

/** The rules by schema path: dotted property names, `[]` for a list's items. */
export const CEL_RULES: Readonly<Record<string, readonly (CelRule | ProbedRule)[]>> = {
  spec: [
    said(
      `!(type(self.etcd.maxLearners) == int && self.etcd.maxLearners > 1) || (${celEtcdVersion()}).matches(${celString(AT_LEAST_3_6)})`,
      RULE_MESSAGES.learnersNeedVersion,
      [celEtcdVersion()],
      '.etcd.maxLearners',
    ),
    said("!has(self.kubernetes) || self.provider.name != 'ssh' || has(self.provider.endpoint)", SSH_MESSAGES.endpointRequired, [], '.provider.endpoint'),
    said('has(self.kubernetes) || !has(self.provider.endpoint)', SSH_MESSAGES.endpointNeedsKubernetes, [], '.provider.endpoint'),
    said('!has(self.kubernetes) || !self.provider.insecure', RULE_MESSAGES.kubernetesInsecure, [], '.kubernetes'),
    said('self.rollout.maxSurge != 0 || self.replicas >= 3', RULE_MESSAGES.surgeNeedsReplicas, [celDecimal('self.replicas')], '.rollout.maxSurge'),
    said(
      `self.provider.name != 'ssh' || has(self.provider.provision) || ${hostCount} >= self.replicas + self.rollout.maxSurge`,
      SSH_MESSAGES.hostCount,
      [celDecimal('(self.replicas + self.rollout.maxSurge)'), celDecimal(hostCount)],
      '.provider.hosts',
    ),
  ],
  'spec.replicas': [said('self % 2 == 1', RULE_MESSAGES.odd, [celDecimal('self')])],
  'spec.provider': [
    ...SSH_ONLY_FIELDS.map((field) => said(`self.name == 'ssh' || !has(self.${field})`, SSH_MESSAGES.onlyForSsh, ['self.name'], `.${field}`)),
    said("self.name != 'ssh' || has(self.identityFile)", SSH_MESSAGES.identityFile, [], '.identityFile'),
    said("self.name != 'ssh' || has(self.knownHostsFile)", SSH_MESSAGES.knownHostsFile, [], '.knownHostsFile'),
    said('!has(self.provision) || !has(self.hosts) || size(self.hosts) == 0', SSH_MESSAGES.hostsOrProvision, [], '.hosts'),
    said(
      '!has(self.endpoint) || !has(self.endpoint.host) || !has(self.hosts) || self.hosts.all(h, h.address != self.endpoint.host.address)',
      SSH_MESSAGES.endpointHostIsMachineHost,
      ['self.endpoint.host.address'],
      '.endpoint.host.address',
    ),
  ],
  'spec.provider.endpoint': [
    said('has(self.host) != has(self.loadBalancer)', SSH_MESSAGES.endpointOneOf),
  ],
  'spec.provider.provisioningDelay': rangeRules,
  'spec.provider.deletionDelay': rangeRules,
  'spec.provider.hosts[].address': [
    {
      rule: `self.matches(${celString(SSH_ADDRESS_FORMS.ipv4)}) || (self.matches(${celString(`(?i)${SSH_ADDRESS_FORMS.hostName}`)}) && !self.matches(${celString(SSH_ADDRESS_FORMS.digitsAndDots)}))`,
      probe: '10.0.0',
    },
  ],
  'spec.provider.provision.timeout': [durationRule],
  'spec.remediation.retryPeriod': [durationRule],
  'spec.remediation.minHealthyPeriod': [durationRule],
  'spec.remediation.unhealthyAfter': [durationRule],
  'spec.remediation.learnerStuckAfter': [durationRule],
  'spec.backup.every': [everyRule],
  'spec.maintenance.every': [everyRule],
};

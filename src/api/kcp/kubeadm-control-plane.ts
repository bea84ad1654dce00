import { z } from 'zod';
import { API_VERSION, compareVersions, describeIssues, KIND, validateControlPlane, type ControlPlane, type ControlPlaneInput } from '../control-plane.ts';
import { InvalidInputError } from '../errors.ts';
import { etcdForKubernetes, nearestInstalled } from './etcd-versions.ts';
import { EXTRA_ARGS_USED, topLevelTree, walkFields, type KcpApiVersion } from './fields.ts';

/**
 * Cluster API KubeadmControlPlane (controlplane.cluster.x-k8s.io v1beta1 and v1beta2) to a fastplane
 * ControlPlane: what a Cluster API user's manifest means for the etcd part of their control plane.
 * Errors name the field path in the KubeadmControlPlane, not in the ControlPlane it becomes.
 */

export const KCP_GROUP = 'controlplane.cluster.x-k8s.io';
export const KCP_KIND = 'KubeadmControlPlane';
export const KCP_PLURAL = 'kubeadmcontrolplanes';
/** The version the controller watches and writes: Cluster API's storage version since v1.11. */
export const KCP_VERSION = 'v1beta2';
/** KubeadmControlPlane objects the controller reconciles carry this annotation, set to "true"; it leaves the others alone. */
export const MANAGE_ANNOTATION = 'fastplane.dev/manage';

export interface KcpConversion {
  manifest: ControlPlane;
  /** How each used field was mapped (the etcd version above all), for stderr. */
  notes: string[];
  /** Every field set but not used, with why. */
  warnings: string[];
}

export function isKubeadmControlPlane(doc: Record<string, unknown>): boolean {
  return doc.kind === KCP_KIND;
}

const wholeNumber = (min: number) =>
  z.number({ error: 'must be a whole number' }).int({ error: 'must be a whole number' }).min(min, { error: `must be at least ${String(min)}` });

// Go's time.Duration text, as metav1.Duration serializes it: 90s, 2m, 1h30m, 1h0m0s, 500ms.
const GO_DURATION = /^(?:\d+(?:\.\d+)?(?:ns|us|µs|ms|s|m|h))+$/;
const GO_UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

function goDurationMs(text: string): number {
  let ms = 0;
  for (const [, amount, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g)) ms += Number(amount) * (GO_UNIT_MS[unit ?? ''] ?? 0);
  return Math.round(ms);
}

const goDuration = z
  .string({ error: 'must be a duration such as 90s, 2m or 1h30m' })
  .regex(GO_DURATION, { error: 'must be a duration such as 90s, 2m or 1h30m' })
  .transform(goDurationMs);
const seconds = wholeNumber(0).transform((s) => s * 1000);

const maxSurge = z.union([wholeNumber(0), z.string().regex(/^\d+%?$/, { error: 'must be a whole number or a percentage such as 1 or 50%' })], {
  error: 'must be a whole number or a percentage such as 1 or 50%',
});

const rollingUpdate = z.looseObject({
  type: z.literal('RollingUpdate', { error: 'must be RollingUpdate (the only rollout strategy)' }).optional(),
  rollingUpdate: z.looseObject({ maxSurge: maxSurge.optional() }).optional(),
});

const extraArgsV1beta1 = z.record(z.string(), z.string({ error: 'must be a string' }), { error: 'must be a map of flag names to strings' });
const extraArgsV1beta2 = z
  .array(z.looseObject({ name: z.string({ error: 'must be a flag name' }), value: z.string({ error: 'must be a string' }) }), { error: 'must be a list of { name, value }' })
  .transform((list) => Object.fromEntries(list.map((arg) => [arg.name, arg.value])));

function etcdSection(extraArgs: typeof extraArgsV1beta1 | typeof extraArgsV1beta2) {
  return z
    .looseObject({
      local: z
        .looseObject({
          imageTag: z.string().regex(/^v?\d+\.\d+\.\d+(?:-\d+)?$/, { error: 'must be an etcd image tag such as 3.5.16-0' }).optional(),
          extraArgs: extraArgs.optional(),
        })
        .optional(),
      external: z.unknown().optional(),
    })
    .refine((etcd) => etcd.external === undefined, {
      error: 'external etcd is run outside the control plane: there is no etcd for fastplane to manage (use local etcd)',
      path: ['external'],
    });
}

function kubeadmConfigSpec(extraArgs: typeof extraArgsV1beta1 | typeof extraArgsV1beta2) {
  return z.looseObject({ clusterConfiguration: z.looseObject({ etcd: etcdSection(extraArgs).optional() }).optional() }).optional();
}

const common = {
  metadata: z.looseObject({
    name: z.string({ error: 'is required' }).max(40, { error: 'must be at most 40 characters (fastplane names members after it)' }).regex(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, {
      error: 'must be a DNS label (lower-case letters, digits and -)',
    }),
  }),
  replicas: wholeNumber(1)
    .max(9, { error: 'must be at most 9' })
    .refine((n) => n % 2 === 1, { error: (issue) => `must be odd with stacked etcd, as Cluster API's webhook requires, got ${String(issue.input)}` })
    .default(1),
  version: z.string({ error: 'is required: the Kubernetes version, such as v1.32.0' }).regex(/^v?\d+\.\d+\.\d+(?:[-+][0-9A-Za-z.-]+)?$/, {
    error: 'must be a Kubernetes version such as v1.32.0',
  }),
};

const SCHEMAS = {
  v1beta1: z.looseObject({
    metadata: common.metadata,
    spec: z.looseObject({
      replicas: common.replicas,
      version: common.version,
      kubeadmConfigSpec: kubeadmConfigSpec(extraArgsV1beta1),
      rolloutStrategy: rollingUpdate.optional(),
      remediationStrategy: z.looseObject({ maxRetry: wholeNumber(0).optional(), retryPeriod: goDuration.optional(), minHealthyPeriod: goDuration.optional() }).optional(),
    }),
  }),
  v1beta2: z.looseObject({
    metadata: common.metadata,
    spec: z.looseObject({
      replicas: common.replicas,
      version: common.version,
      kubeadmConfigSpec: kubeadmConfigSpec(extraArgsV1beta2),
      rollout: z.looseObject({ strategy: rollingUpdate.optional() }).optional(),
      remediation: z.looseObject({ maxRetry: wholeNumber(0).optional(), retryPeriodSeconds: seconds.optional(), minHealthyPeriodSeconds: seconds.optional() }).optional(),
    }),
  }),
};

function apiVersionOf(doc: Record<string, unknown>): KcpApiVersion {
  const given = doc.apiVersion;
  if (given === `${KCP_GROUP}/v1beta1`) return 'v1beta1';
  if (given === `${KCP_GROUP}/v1beta2`) return 'v1beta2';
  throw new InvalidInputError([`apiVersion: a KubeadmControlPlane must be ${KCP_GROUP}/v1beta1 or ${KCP_GROUP}/v1beta2, got ${String(given)}`]);
}

/** The fields of both API versions, in one shape. */
interface KcpFields {
  name: string;
  replicas: number;
  kubernetesVersion: string;
  imageTag: string | undefined;
  extraArgs: Record<string, string>;
  maxSurge: number | string | undefined;
  remediation: { maxRetry?: number | undefined; retryPeriodMs?: number | undefined; minHealthyPeriodMs?: number | undefined };
  /** Where extraArgs sit, for messages. */
  extraArgsPath: string;
}

function parsed<S extends z.ZodType>(schema: S, doc: unknown): z.output<S> {
  const result = schema.safeParse(doc);
  if (!result.success) throw new InvalidInputError(describeIssues(result.error));
  return result.data;
}

/** What both API versions keep in the same place. */
interface CommonSpec {
  replicas: number;
  version: string;
  kubeadmConfigSpec?: { clusterConfiguration?: { etcd?: { local?: { imageTag?: string | undefined; extraArgs?: Record<string, string> | undefined } | undefined } | undefined } | undefined } | undefined;
}

function withCommon(name: string, spec: CommonSpec, maxSurge: number | string | undefined, remediation: KcpFields['remediation']): KcpFields {
  const local = spec.kubeadmConfigSpec?.clusterConfiguration?.etcd?.local;
  return {
    name,
    replicas: spec.replicas,
    kubernetesVersion: spec.version,
    imageTag: local?.imageTag,
    extraArgs: local?.extraArgs ?? {},
    maxSurge,
    remediation,
    extraArgsPath: 'spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.extraArgs',
  };
}

function readFields(doc: Record<string, unknown>, version: KcpApiVersion): KcpFields {
  if (version === 'v1beta1') {
    const { metadata, spec } = parsed(SCHEMAS.v1beta1, doc);
    const r = spec.remediationStrategy;
    return withCommon(metadata.name, spec, spec.rolloutStrategy?.rollingUpdate?.maxSurge, { maxRetry: r?.maxRetry, retryPeriodMs: r?.retryPeriod, minHealthyPeriodMs: r?.minHealthyPeriod });
  }
  const { metadata, spec } = parsed(SCHEMAS.v1beta2, doc);
  const r = spec.remediation;
  return withCommon(metadata.name, spec, spec.rollout?.strategy?.rollingUpdate?.maxSurge, { maxRetry: r?.maxRetry, retryPeriodMs: r?.retryPeriodSeconds, minHealthyPeriodMs: r?.minHealthyPeriodSeconds });
}

/** maxSurge as a count: a percentage of replicas rounds up, as Kubernetes rounds a surge. */
function surgeCount(value: number | string | undefined, replicas: number, path: string): number {
  if (value === undefined) return 1;
  const count = typeof value === 'number' ? value : value.endsWith('%') ? Math.ceil((replicas * Number(value.slice(0, -1))) / 100) : Number(value);
  if (count > 9) throw new InvalidInputError([`${path}: must be at most 9, got ${String(value)}`]);
  if (count === 0 && replicas < 3) throw new InvalidInputError([`${path}: 0 (remove before add) needs at least 3 replicas, got ${String(replicas)}`]);
  return count;
}

/** A millisecond count in the one-unit form fastplane's durations take. */
function toDuration(ms: number): string {
  if (ms === 0) return '0s';
  for (const [unit, size] of [['h', 3_600_000], ['m', 60_000], ['s', 1000]] as const) if (ms % size === 0) return `${String(ms / size)}${unit}`;
  return `${String(ms)}ms`;
}

function positiveFlag(args: Record<string, string>, name: string, path: string, max: number): number | undefined {
  const text = args[name];
  if (text === undefined) return undefined;
  if (!/^\d+$/.test(text) || Number(text) < 1 || Number(text) > max) throw new InvalidInputError([`${path}.${name}: must be a whole number from 1 to ${String(max)}, got ${text}`]);
  return Number(text);
}

/** The etcd version and how it was chosen: the image tag, else kubeadm's table; then the nearest installed. */
function chooseEtcd(fields: KcpFields, installed: readonly string[]): { version: string; note: string } {
  const wanted = fields.imageTag
    ? { etcd: fields.imageTag.replace(/^v/, '').replace(/-\d+$/, ''), how: 'spec.kubeadmConfigSpec.clusterConfiguration.etcd.local.imageTag' }
    : etcdForKubernetes(fields.kubernetesVersion);
  const source = fields.imageTag ? `imageTag ${fields.imageTag}` : `Kubernetes ${fields.kubernetesVersion}`;
  const chosen = nearestInstalled(wanted.etcd, installed);
  if (chosen === undefined) return { version: wanted.etcd, note: `etcd: ${source} -> ${wanted.etcd} (${wanted.how}); no etcd is installed here` };
  const used = chosen === wanted.etcd ? 'installed' : `nearest installed of ${installed.join(', ')}`;
  return { version: chosen, note: `etcd: ${source} -> ${wanted.etcd} (${wanted.how}) -> using ${chosen} (${used})` };
}

/**
 * spec.kubernetes.version from KCP's spec.version: that release when installed here, else the installed
 * patch of its minor nearest to it (patches of a minor are interchangeable for a new control plane).
 * With no build of that minor, the control plane is converted etcd only, and a warning says how to
 * build the minor.
 */
function chooseKubernetes(wanted: string, installed: readonly string[]): { version?: string; note: string } {
  const version = wanted.replace(/^v/, '').replace(/[-+].*$/, '');
  const minor = version.split('.').slice(0, 2).join('.');
  const chosen = nearestInstalled(version, installed.filter((candidate) => candidate.startsWith(`${minor}.`)));
  if (chosen === undefined) {
    const found = installed.length > 0 ? installed.join(', ') : 'none';
    return { note: `kubernetes: ${wanted} -> Kubernetes ${minor} is not built here (found: ${found}): etcd only; \`bash scripts/install-kubernetes.sh ${minor}\` builds a minor that has a wrapper module` };
  }
  return { version: chosen, note: `kubernetes: ${wanted} -> ${chosen} (${chosen === version ? 'installed' : `the installed patch of ${minor}`})` };
}

/**
 * Converts a parsed KubeadmControlPlane. `installedEtcd` lists the etcd versions available here; the
 * nearest one is used, so the result runs as it is.
 */
export function convertKubeadmControlPlane(doc: Record<string, unknown>, installedEtcd: readonly string[], installedKubernetes: readonly string[] = []): KcpConversion {
  const version = apiVersionOf(doc);
  const fieldReport = walkFields(doc, topLevelTree(version), version);
  if (fieldReport.errors.length > 0) throw new InvalidInputError(fieldReport.errors);
  const fields = readFields(doc, version);
  const warnings = [...fieldReport.warnings];
  for (const name of Object.keys(fields.extraArgs)) {
    if (!EXTRA_ARGS_USED.has(name)) warnings.push(`${fields.extraArgsPath}.${name}: ignored: fastplane starts etcd with its own flags; this one is not passed`);
  }
  const etcd = chooseEtcd(fields, installedEtcd);
  const kubernetes = chooseKubernetes(fields.kubernetesVersion, installedKubernetes);
  const notes = [etcd.note, kubernetes.note];
  const maxLearners = positiveFlag(fields.extraArgs, 'max-learners', fields.extraArgsPath, 8) ?? positiveFlag(fields.extraArgs, 'experimental-max-learners', fields.extraArgsPath, 8);
  const quotaBackendBytes = positiveFlag(fields.extraArgs, 'quota-backend-bytes', fields.extraArgsPath, Number.MAX_SAFE_INTEGER);
  const surgePath = version === 'v1beta1' ? 'spec.rolloutStrategy.rollingUpdate.maxSurge' : 'spec.rollout.strategy.rollingUpdate.maxSurge';
  const surge = surgeCount(fields.maxSurge, fields.replicas, surgePath);
  const etcdSpec: NonNullable<ControlPlaneInput['spec']>['etcd'] = {};
  if (maxLearners !== undefined && maxLearners > 1 && compareVersions(etcd.version, '3.6.0') < 0) {
    warnings.push(`${fields.extraArgsPath}.max-learners: ignored: above 1 needs etcd 3.6 or later, and etcd ${etcd.version} is used; learners join one at a time`);
  } else if (maxLearners !== undefined) etcdSpec.maxLearners = maxLearners;
  if (quotaBackendBytes !== undefined) etcdSpec.quotaBackendBytes = quotaBackendBytes;
  const { maxRetry, retryPeriodMs, minHealthyPeriodMs } = fields.remediation;
  const remediation: Record<string, unknown> = {};
  if (maxRetry !== undefined) remediation.maxRetry = maxRetry;
  if (retryPeriodMs !== undefined) remediation.retryPeriod = toDuration(retryPeriodMs);
  if (minHealthyPeriodMs !== undefined) remediation.minHealthyPeriod = toDuration(minHealthyPeriodMs);
  const manifest = validateControlPlane({
    apiVersion: API_VERSION,
    kind: KIND,
    metadata: { name: fields.name },
    spec: { replicas: fields.replicas, version: etcd.version, ...(kubernetes.version === undefined ? {} : { kubernetes: { version: kubernetes.version } }), etcd: etcdSpec, rollout: { maxSurge: surge }, remediation },
  });
  // KCP without maxRetry retries for ever; fastplane always ends a remediation loop (its default).
  const retries = maxRetry === undefined ? `${String(manifest.spec.remediation.maxRetry)} (fastplane's default; KCP without maxRetry retries without limit)` : String(maxRetry);
  notes.push(
    `replicas ${String(fields.replicas)}, maxSurge ${String(surge)}, remediation maxRetry ${retries}, ` +
      `retryPeriod ${manifest.spec.remediation.retryPeriod}, minHealthyPeriod ${manifest.spec.remediation.minHealthyPeriod}`,
  );
  return { manifest, notes, warnings };
}

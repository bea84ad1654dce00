import { readFileSync } from 'node:fs';
import { parse as parseYaml, YAMLParseError } from 'yaml';
import { z } from 'zod';
import { parseDuration, parseDurationRange } from './duration.ts';
import { InvalidInputError } from './errors.ts';
import { defaultEtcdFor, KubernetesSchema } from './kubernetes.ts';
import { checkSshProvider, sshProviderFields } from './ssh-provider.ts';
import { compareVersions } from './versions.ts';

export const API_VERSION = 'fastplane.dev/v1alpha1';
export const KIND = 'ControlPlane';

const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const VERSION = /^\d+\.\d+\.\d+$/;
export const DEFAULT_ETCD = '3.6.17';

/**
 * The words of the rules whose message names a value, in one place: the CLI's refinements print them,
 * and the CRD's CEL rules build the same sentences (src/api/crd-rules.ts), so `kubectl apply` and
 * `fastplane up` refuse a spec with the same words.
 */
export const RULE_MESSAGES = {
  odd: (got: string) => `must be odd, got ${got}`,
  learnersNeedVersion: (version: string) => `above 1 needs etcd 3.6 or later (--max-learners), got version ${version}`,
  kubernetesInsecure: () => 'needs certificates: a Kubernetes control plane cannot run with spec.provider.insecure',
  surgeNeedsReplicas: (replicas: string) => `0 (remove before add) needs at least 3 replicas, got ${replicas}`,
};

// Durations and versions are short; their bound lets the API server afford the CRD's CEL rules on
// them (docs/crds.md).
const SHORT = 32;

const duration = (what: string) => {
  const error = `${what} must be a duration such as 500ms, 8s or 2m`;
  return z.string().max(SHORT, { error, abort: true }).refine((text) => parseDuration(text) !== undefined, { error });
};

const durationOrRange = (() => {
  const error = 'must be a duration (8s) or a range (3s-8s) with min <= max';
  return z.string().max(SHORT, { error, abort: true }).refine((text) => parseDurationRange(text) !== undefined, { error });
})();

const every = (example: string) => {
  const error = `every must be a duration of 1s or more, such as ${example}`;
  return z.string().max(SHORT, { error, abort: true }).refine((text) => (parseDuration(text) ?? 0) >= 1000, { error });
};

const ProviderSchema = z
  .object({
    name: z
      .enum(['local-process', 'ssh'], { error: 'unknown provider; known: local-process, ssh' })
      .default('local-process')
      .describe('Where machines come from: local-process (processes on this host) or ssh (hosts you own, reached over SSH).'),
    provisioningDelay: durationOrRange.default('0s').describe('An added delay before a machine is ready (8s, or a range 3s-8s drawn uniformly): simulates slow infrastructure.'),
    deletionDelay: durationOrRange.default('0s').describe('An added delay before a machine is gone (8s or 3s-8s).'),
    failureDomains: z
      .array(z.string().max(63, { error: 'must be a DNS label', abort: true }).regex(DNS_LABEL, { error: 'must be a DNS label' }))
      .max(32, { error: 'must be at most 32 failure domains' })
      .refine((list) => new Set(list).size === list.length, { error: 'must not repeat a failure domain' })
      .default([])
      .describe('Failure domains (DNS labels) the machines are spread over.'),
    insecure: z
      .boolean({ error: 'must be true or false' })
      .default(false)
      .describe('Debugging only: plain http without certificates. Fixed when the control plane is created.'),
    ...sshProviderFields,
  })
  .strict()
  .describe('The machine provider and its settings.');

const ScaleUpSchema = z
  .object({
    strategy: z
      .enum(['parallel', 'serial'], { error: 'must be parallel or serial' })
      .default('parallel')
      .describe('parallel: create every missing machine at once (membership changes stay one at a time); serial: one machine at a time.'),
    maxConcurrentProvisioning: z.number().int().min(1).max(100).default(10).describe('How many machines are created or deleted at once.'),
  })
  .strict()
  .describe('How machines are added.');

const EtcdSchema = z
  .object({
    maxLearners: z
      .union([z.literal('auto'), z.number().int().min(1).max(8)], { error: 'must be auto or a whole number from 1 to 8' })
      .default('auto')
      .describe('How many learners may catch up at once. auto: from etcd 3.6, as many as join in a plan (members run --max-learners 8); below 3.6 etcd allows one. A number pins it (above 1 needs 3.6).'),
    quotaBackendBytes: z.number().int().positive().optional().describe("etcd's --quota-backend-bytes: the size of the backend before the NOSPACE alarm."),
    reconfigurationCheck: z
      .enum(['etcd', 'fastplane'], { error: 'must be etcd or fastplane' })
      .default('etcd')
      .describe("Who guards membership changes: etcd's own checks (--strict-reconfig-check, the 5 s rule), or fastplane's planner making the same checks on its own observations with etcd's turned off."),
    binaries: z
      .string()
      .regex(/^\/[^\0]*$/, { error: 'must be an absolute directory path' })
      .optional()
      .describe('A directory holding etcd, etcdctl and etcdutl of spec.version, used instead of the installed ones; absolute, as the spec is stored and read again by processes started elsewhere.'),
  })
  .strict()
  .describe('How the etcd members run.');

const RolloutSchema = z
  .object({ maxSurge: z.number().int().min(0).max(9).default(1).describe('Machines added beyond spec.replicas during a rollout; 0 removes a member before adding its replacement (needs at least 3 replicas).') })
  .strict()
  .describe('How a version change replaces machines.');

const RemediationSchema = z
  .object({
    maxRetry: z
      .number()
      .int()
      .min(0)
      .default(5)
      .describe('Remediations in a row (each within minHealthyPeriod of the last) beyond the first, before the control plane is Blocked with CannotBeRemediated: a fault that every replacement meets again ends instead of looping until the addresses run out.'),
    retryPeriod: duration('retryPeriod').default('0s').describe('The least time between two remediations.'),
    minHealthyPeriod: duration('minHealthyPeriod').default('1h').describe('A remediation this long after the last one starts a new count.'),
    unhealthyAfter: duration('unhealthyAfter').default('10s').describe('How long a member stays unhealthy before its machine is replaced.'),
    learnerStuckAfter: duration('learnerStuckAfter').default('2m').describe('How long a learner may take to catch up before it is removed and its machine replaced.'),
  })
  .strict()
  .describe('When unhealthy machines are replaced.');

const BackupSchema = z
  .object({
    every: every('30m or 6h').default('30m').describe('How often a backup is taken.'),
    keep: z.number({ error: 'must be a whole number' }).int({ error: 'must be a whole number' }).min(1, { error: 'must be at least 1' }).max(10_000).default(24).describe('How many backups are kept.'),
  })
  .strict()
  .describe('Scheduled backups into <state dir>/backups/NAME, taken by the reconcile loop; absent: none scheduled.');

const MaintenanceSchema = z
  .object({
    every: every('24h').default('24h').describe('How often maintenance runs once the control plane is initialized and converged.'),
    retainRevisions: z
      .number({ error: 'must be a whole number' })
      .int({ error: 'must be a whole number' })
      .min(0, { error: 'must be at least 0' })
      .default(10_000)
      .describe('Compaction keeps this many revisions.'),
    fragmentationThreshold: z
      .number({ error: 'must be a number' })
      .gt(0, { error: 'must be above 0' })
      .max(1, { error: 'must be at most 1' })
      .default(0.5)
      .describe('A member whose unused share of its database is above this is defragmented.'),
  })
  .strict()
  .describe('Routine maintenance by the reconcile loop: compaction to a retained window and defragmentation of fragmented members, one at a time, leader last (as fastplane maintain).');

const SpecSchema = z
  .object({
    replicas: z
      .number({ error: 'must be a whole number' })
      .int({ error: 'must be a whole number' })
      .min(1, { error: 'must be at least 1' })
      .max(9, { error: 'must be at most 9' })
      .refine((n) => n % 2 === 1, { error: (issue) => RULE_MESSAGES.odd(String(issue.input)) })
      .default(3)
      .describe('How many etcd members (voters) the control plane runs: odd, from 1 to 9.'),
    version: z
      .string()
      .max(SHORT, { error: 'must be an etcd version such as 3.4.23', abort: true })
      .regex(VERSION, { error: 'must be an etcd version such as 3.4.23' })
      .optional()
      .describe(`The etcd version. Default: the one kubeadm pairs with spec.kubernetes.version, else ${DEFAULT_ETCD}.`),
    kubernetes: KubernetesSchema.optional(),
    provider: ProviderSchema.default(() => ProviderSchema.parse({})),
    scaleUp: ScaleUpSchema.default(() => ScaleUpSchema.parse({})),
    etcd: EtcdSchema.default(() => EtcdSchema.parse({})),
    rollout: RolloutSchema.default(() => RolloutSchema.parse({})),
    remediation: RemediationSchema.default(() => RemediationSchema.parse({})),
    backup: BackupSchema.optional(),
    maintenance: MaintenanceSchema.default(() => MaintenanceSchema.parse({})),
  })
  .strict()
  .describe('The desired state of the control plane.')
  .transform(({ version, ...spec }) => ({ ...spec, version: version ?? (spec.kubernetes === undefined ? DEFAULT_ETCD : defaultEtcdFor(spec.kubernetes.version)) }))
  .superRefine((spec, ctx) => {
    checkSshProvider(spec.provider, spec.replicas, spec.rollout.maxSurge, spec.kubernetes !== undefined, (path, message) => {
      ctx.addIssue({ code: 'custom', path, message });
    });
    if (spec.etcd.maxLearners !== 'auto' && spec.etcd.maxLearners > 1 && compareVersions(spec.version, '3.6.0') < 0) {
      ctx.addIssue({ code: 'custom', path: ['etcd', 'maxLearners'], message: RULE_MESSAGES.learnersNeedVersion(spec.version) });
    }
    if (spec.kubernetes !== undefined && spec.provider.insecure) {
      ctx.addIssue({ code: 'custom', path: ['kubernetes'], message: RULE_MESSAGES.kubernetesInsecure() });
    }
    if (spec.rollout.maxSurge === 0 && spec.replicas < 3) {
      ctx.addIssue({ code: 'custom', path: ['rollout', 'maxSurge'], message: RULE_MESSAGES.surgeNeedsReplicas(String(spec.replicas)) });
    }
  });

export const ControlPlaneSchema = z
  .object({
    apiVersion: z.literal(API_VERSION, { error: `must be ${API_VERSION}` }),
    kind: z.literal(KIND, { error: `must be ${KIND}` }),
    metadata: z
      .object({
        name: z
          .string({ error: 'is required' })
          .max(40, { error: 'must be at most 40 characters' })
          .regex(DNS_LABEL, { error: 'must be a DNS label (lower-case letters, digits and -)' }),
      })
      .strict(),
    spec: SpecSchema.default(() => SpecSchema.parse({})),
  })
  .strict()
  .describe('An etcd control plane (and, with spec.kubernetes, the Kubernetes control plane on it) that fastplane brings up, scales, upgrades and repairs.');

export type ControlPlane = z.infer<typeof ControlPlaneSchema>;
export type ControlPlaneSpec = ControlPlane['spec'];
export type ControlPlaneInput = z.input<typeof ControlPlaneSchema>;

export { compareVersions } from './versions.ts';

/** One line per zod issue: the dotted field path, then the rule. */
export function describeIssues(error: z.ZodError): string[] {
  return error.issues.map((issue) => {
    const path = issue.path.map(String).join('.');
    return path ? `${path}: ${issue.message}` : issue.message;
  });
}

/** Validates an already-parsed object; throws InvalidInputError naming each field and rule. */
export function validateControlPlane(input: unknown): ControlPlane {
  const result = ControlPlaneSchema.safeParse(input);
  if (!result.success) throw new InvalidInputError(describeIssues(result.error));
  return result.data;
}

/** Parses YAML or JSON text (JSON is YAML) into a mapping, not yet validated against any kind. */
export function parseManifestText(text: string, source = 'manifest'): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (error) {
    const detail = error instanceof YAMLParseError ? error.message.split('\n')[0] : String(error);
    throw new InvalidInputError([`${source}: not valid YAML or JSON: ${detail ?? ''}`]);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc)) {
    throw new InvalidInputError([`${source}: must be a mapping with apiVersion, kind, metadata and spec`]);
  }
  return doc as Record<string, unknown>;
}

/** Parses YAML or JSON text (JSON is YAML) into a validated ControlPlane. */
export function parseControlPlane(text: string, source = 'manifest'): ControlPlane {
  return validateControlPlane(parseManifestText(text, source));
}

/** The text of a manifest file; an unreadable file is bad input naming the path. */
export function readManifestFile(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'unreadable';
    throw new InvalidInputError([`${path}: cannot read the manifest (${code})`]);
  }
}

export function loadControlPlaneFile(path: string): ControlPlane {
  return parseControlPlane(readManifestFile(path), path);
}

/** A ControlPlane with only a name and defaults, for flag-only use (`fastplane up --name t`). */
export function defaultControlPlane(name: string): ControlPlane {
  return validateControlPlane({ apiVersion: API_VERSION, kind: KIND, metadata: { name } });
}

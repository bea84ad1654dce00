/**
 * Which KubeadmControlPlane fields fastplane uses, which it ignores and why, and which are not
 * KubeadmControlPlane fields at all. A walk over the manifest against this tree yields a warning for
 * every ignored field that is set and an error for every unknown one, so nothing is dropped silently.
 */

export type KcpApiVersion = 'v1beta1' | 'v1beta2';

/** `USED`: converted; a string: ignored, with the reason; a tree: look inside. */
export const USED = Symbol('used');
export interface FieldTree {
  readonly [key: string]: typeof USED | string | FieldTree;
}
/** The reason for any key a tree does not list (open maps); without it, an unlisted key is an error. */
export const ANY = '*';

const OBJECT_META = 'Kubernetes object metadata: fastplane keeps no labels or annotations';
const MACHINE_TEMPLATE = "machines come from fastplane's provider (spec.provider), not from an infrastructure template; docs/capi-provider.md describes how a provider would use it";
const BOOTSTRAP = 'kubeadm bootstrap settings for each machine: fastplane runs only etcd';
const COMPONENTS = 'Kubernetes component settings: fastplane runs only etcd';
const TRIGGERED_ROLLOUT = 'fastplane rolls out on a version change only, not at a time or on certificate expiry';
const MACHINE_NAMING = 'fastplane names machines <control plane>-<ordinal>';

const LOCAL_ETCD: FieldTree = {
  imageTag: USED,
  // Each argument is looked at on its own (see EXTRA_ARGS_USED).
  extraArgs: USED,
  imageRepository: 'members run installed etcd binaries, not images',
  dataDir: "each member's data dir lives under fastplane's state dir",
  serverCertSANs: "fastplane's CA issues each member a certificate for its own address",
  peerCertSANs: "fastplane's CA issues each member a certificate for its own address",
  extraEnvs: 'members run with fastplane’s environment',
};

const KUBEADM_CONFIG_SPEC: FieldTree = {
  clusterConfiguration: {
    etcd: { local: LOCAL_ETCD, external: USED },
    [ANY]: COMPONENTS,
  },
  [ANY]: BOOTSTRAP,
};

const METADATA: FieldTree = {
  name: USED,
  namespace: 'fastplane has no namespaces: metadata.name alone names the control plane',
  [ANY]: OBJECT_META,
};

const SPECS: Record<KcpApiVersion, FieldTree> = {
  v1beta1: {
    replicas: USED,
    version: USED,
    machineTemplate: MACHINE_TEMPLATE,
    kubeadmConfigSpec: KUBEADM_CONFIG_SPEC,
    rolloutStrategy: { type: USED, rollingUpdate: { maxSurge: USED } },
    rolloutAfter: TRIGGERED_ROLLOUT,
    rolloutBefore: TRIGGERED_ROLLOUT,
    remediationStrategy: { maxRetry: USED, retryPeriod: USED, minHealthyPeriod: USED },
    machineNamingStrategy: MACHINE_NAMING,
  },
  v1beta2: {
    replicas: USED,
    version: USED,
    machineTemplate: MACHINE_TEMPLATE,
    kubeadmConfigSpec: KUBEADM_CONFIG_SPEC,
    rollout: { strategy: { type: USED, rollingUpdate: { maxSurge: USED } }, after: TRIGGERED_ROLLOUT, before: TRIGGERED_ROLLOUT },
    remediation: { maxRetry: USED, retryPeriodSeconds: USED, minHealthyPeriodSeconds: USED },
    machineNaming: MACHINE_NAMING,
  },
};

/** Where the other API version keeps a field, for the error on a field of the wrong version. */
const RENAMED: Record<KcpApiVersion, Record<string, string>> = {
  v1beta1: { rollout: 'rolloutStrategy, rolloutAfter and rolloutBefore', remediation: 'remediationStrategy', machineNaming: 'machineNamingStrategy' },
  v1beta2: {
    rolloutStrategy: 'rollout.strategy',
    rolloutAfter: 'rollout.after',
    rolloutBefore: 'rollout.before',
    remediationStrategy: 'remediation (with retryPeriodSeconds and minHealthyPeriodSeconds)',
    machineNamingStrategy: 'machineNaming',
  },
};

/** etcd flags fastplane honours from `etcd.local.extraArgs`; every other flag is reported. */
export const EXTRA_ARGS_USED = new Set(['max-learners', 'experimental-max-learners', 'quota-backend-bytes']);

export function topLevelTree(version: KcpApiVersion): FieldTree {
  return {
    apiVersion: USED,
    kind: USED,
    metadata: METADATA,
    spec: SPECS[version],
    status: 'observed state, not desired: fastplane observes etcd itself',
  };
}

export interface FieldReport {
  warnings: string[];
  errors: string[];
}

function isMapping(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** Walks a manifest against a field tree: ignored fields become warnings, unknown ones errors. */
export function walkFields(doc: Record<string, unknown>, tree: FieldTree, version: KcpApiVersion, path: string[] = [], report: FieldReport = { warnings: [], errors: [] }): FieldReport {
  for (const [key, value] of Object.entries(doc)) {
    const here = [...path, key];
    const dotted = here.join('.');
    const rule = tree[key] ?? tree[ANY];
    if (rule === undefined) {
      const renamed = path.length === 1 && path[0] === 'spec' ? RENAMED[version][key] : undefined;
      const hint = renamed === undefined ? '' : ` (KubeadmControlPlane ${version} calls it spec.${renamed})`;
      report.errors.push(`${dotted}: not a field of KubeadmControlPlane ${version}${hint}`);
    } else if (typeof rule === 'string') {
      report.warnings.push(`${dotted}: ignored: ${rule}`);
    } else if (rule !== USED && isMapping(value)) {
      walkFields(value, rule, version, here, report);
    }
  }
  return report;
}

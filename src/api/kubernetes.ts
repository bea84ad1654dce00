import { z } from 'zod';
import { etcdForKubernetes } from './kcp/etcd-versions.ts';
import { NEWEST_PATCH } from './version-path.ts';

/**
 * `spec.kubernetes`: the Kubernetes control plane stacked on the etcd members (kubeadm's stacked
 * topology). Absent, the control plane is etcd only.
 */
export const KubernetesSchema = z
  .object({
    version: z
      .string({ error: 'is required: a Kubernetes version such as 1.36.3' })
      .max(32, { error: 'must be a Kubernetes version such as 1.36.3', abort: true })
      .regex(/^v?\d+\.\d+\.\d+$/, { error: 'must be a Kubernetes version such as 1.36.3' })
      .describe('The Kubernetes version, written with or without the v (1.36.3, v1.36.3); kept without it.')
      .transform((text) => text.replace(/^v/, '')),
    binaries: z
      .string()
      .regex(/^\/[^\0]*$/, { error: 'must be an absolute directory path' })
      .optional()
      .describe('A directory holding kube-apiserver, kube-controller-manager, kube-scheduler and kubectl of version, used instead of the installed ones; absolute, as spec.etcd.binaries.'),
  })
  .strict()
  .describe("The Kubernetes control plane stacked on the etcd members (kubeadm's stacked topology); absent, the control plane is etcd only.");

export type KubernetesSpec = z.infer<typeof KubernetesSchema>;

/**
 * The etcd a Kubernetes version runs when the spec names none: the release line kubeadm pairs with that
 * minor (its SupportedEtcdVersion table), at the newest patch of that line fastplane builds. kubeadm's
 * exact patch is often not the one installed; the line is what matters for the data format.
 */
export function defaultEtcdFor(kubernetesVersion: string): string {
  const paired = etcdForKubernetes(kubernetesVersion).etcd;
  const line = paired.split('.').slice(0, 2).join('.');
  return NEWEST_PATCH[line] ?? paired;
}

function minorOf(version: string): { major: number; minor: number } {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return { major, minor };
}

/**
 * Whether `spec.kubernetes` may go from `from` to `to` (undefined: none): the message when it may not.
 * Kubernetes upgrades one minor at a time and never goes down a minor (its version skew policy); a
 * control plane's Kubernetes, once on, stays on.
 */
export function validateKubernetesChange(from: string | undefined, to: string | undefined, running: readonly string[] = []): string | undefined {
  if (from !== undefined && to === undefined) return `spec.kubernetes: cannot be removed from a control plane that runs Kubernetes ${from}; run fastplane down first`;
  if (to === undefined) return undefined;
  for (const [current, what] of [...(from === undefined ? [] : [[from, 'the control plane runs'] as const]), ...running.map((version) => [version, 'a machine still runs'] as const)]) {
    const a = minorOf(current);
    const b = minorOf(to);
    if (a.major !== b.major) return `spec.kubernetes.version: cannot change the major version (${current} -> ${to})`;
    if (b.minor < a.minor) return `spec.kubernetes.version: cannot go down a minor version (${current} -> ${to}); ${what} ${current}, and Kubernetes supports no downgrade`;
    if (b.minor > a.minor + 1) return `spec.kubernetes.version: cannot skip a minor version (${current} -> ${to}); ${what} ${current}: upgrade to ${String(a.major)}.${String(a.minor + 1)} first`;
  }
  return undefined;
}

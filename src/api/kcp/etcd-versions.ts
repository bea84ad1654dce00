import { compareVersions } from '../versions.ts';

/**
 * The etcd version kubeadm deploys for each Kubernetes minor: kubeadm's `SupportedEtcdVersion` map in
 * `cmd/kubeadm/app/constants/constants.go` (kubernetes/kubernetes), with the image suffix (`-0`)
 * dropped. kubeadm keeps a few minors in that map per release and raises the etcd patch in patch
 * releases, so each row names the kubeadm whose map it was read from. docs/capi-provider.md shows
 * the table and how to refresh it.
 */
export const KUBEADM_ETCD_VERSIONS: readonly { minor: number; etcd: string; source: string }[] = [
  { minor: 17, etcd: '3.4.3', source: 'kubeadm 1.17-1.18' },
  { minor: 18, etcd: '3.4.3', source: 'kubeadm 1.17-1.18' },
  { minor: 19, etcd: '3.4.13', source: 'kubeadm 1.19-1.21' },
  { minor: 20, etcd: '3.4.13', source: 'kubeadm 1.19-1.21' },
  { minor: 21, etcd: '3.4.13', source: 'kubeadm 1.19-1.21' },
  { minor: 22, etcd: '3.5.4', source: 'kubeadm 1.25' },
  { minor: 23, etcd: '3.5.4', source: 'kubeadm 1.25' },
  { minor: 24, etcd: '3.5.4', source: 'kubeadm 1.25' },
  { minor: 25, etcd: '3.5.4', source: 'kubeadm 1.25' },
  { minor: 26, etcd: '3.5.6', source: 'kubeadm 1.26.0' },
  { minor: 27, etcd: '3.5.7', source: 'kubeadm 1.27.0' },
  { minor: 28, etcd: '3.5.9', source: 'kubeadm 1.28.0' },
  { minor: 29, etcd: '3.5.24', source: 'kubeadm 1.32 patch releases' },
  { minor: 30, etcd: '3.5.24', source: 'kubeadm 1.32 patch releases' },
  { minor: 31, etcd: '3.5.24', source: 'kubeadm 1.33 patch releases' },
  { minor: 32, etcd: '3.5.24', source: 'kubeadm 1.33 patch releases' },
  { minor: 33, etcd: '3.5.24', source: 'kubeadm 1.33 patch releases' },
  { minor: 34, etcd: '3.6.9', source: 'kubeadm 1.36' },
  { minor: 35, etcd: '3.6.9', source: 'kubeadm 1.36' },
  { minor: 36, etcd: '3.6.9', source: 'kubeadm 1.36' },
];

export interface EtcdForKubernetes {
  etcd: string;
  /** How the version was found, for the printed mapping. */
  how: string;
}

/**
 * The etcd kubeadm uses for a Kubernetes version (`v1.30.4`, `1.30.4`). Like kubeadm's
 * `EtcdSupportedVersion`, a minor outside the table falls back to the nearest row; the caller has
 * already checked the version's form.
 */
export function etcdForKubernetes(kubernetesVersion: string): EtcdForKubernetes {
  const minor = Number(kubernetesVersion.replace(/^v/, '').split('.')[1]);
  const exact = KUBEADM_ETCD_VERSIONS.find((row) => row.minor === minor);
  if (exact) return { etcd: exact.etcd, how: `kubeadm's SupportedEtcdVersion for 1.${String(minor)}, as in ${exact.source}` };
  const first = KUBEADM_ETCD_VERSIONS[0];
  const last = KUBEADM_ETCD_VERSIONS[KUBEADM_ETCD_VERSIONS.length - 1];
  const nearest = first !== undefined && minor < first.minor ? first : last;
  if (nearest === undefined) throw new Error('the kubeadm etcd table is empty');
  return { etcd: nearest.etcd, how: `1.${String(minor)} is outside kubeadm's table: the nearest row, 1.${String(nearest.minor)}, as kubeadm falls back` };
}

/**
 * The installed etcd closest to the wanted one: the same minor line first (nearest patch, the lower on a
 * tie), else the nearest minor line (the lower on a tie, as an older etcd never reads a newer data dir).
 * Undefined when nothing is installed.
 */
export function nearestInstalled(wanted: string, installed: readonly string[]): string | undefined {
  const [major, minor, patch] = wanted.split('.').map(Number);
  const rank = (version: string): [number, number, number] => {
    const [ma, mi, pa] = version.split('.').map(Number);
    const lineDistance = Math.abs(((ma ?? 0) - (major ?? 0)) * 1000 + (mi ?? 0) - (minor ?? 0));
    return [lineDistance, lineDistance === 0 ? Math.abs((pa ?? 0) - (patch ?? 0)) : 0, compareVersions(version, wanted) > 0 ? 1 : 0];
  };
  const sorted = [...installed].sort((a, b) => {
    const ra = rank(a);
    const rb = rank(b);
    return ra[0] - rb[0] || ra[1] - rb[1] || ra[2] - rb[2] || compareVersions(a, b);
  });
  return sorted[0];
}

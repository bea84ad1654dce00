import { existsSync, readdirSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { InvalidInputError } from '../../api/errors.ts';
import { reportedVersion } from '../host/reported-version.ts';

/**
 * Finds the Kubernetes programs by the version they report, as etcd-binaries.ts does for etcd: a
 * control plane's own directory (`spec.kubernetes.binaries`) for the version its spec names, else the
 * cache scripts/install-kubernetes.sh fills (`<cache>/v1.N.P/usr/bin/`). Versions are written without
 * the `v` here (`1.36.3`), as in the spec.
 */

export const KUBERNETES_PROGRAMS = ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler', 'kubectl'] as const;
export type KubernetesProgram = (typeof KUBERNETES_PROGRAMS)[number];

export function kubernetesCacheDir(): string {
  return process.env.FASTPLANE_KUBERNETES_CACHE ?? join(homedir(), '.cache', 'fastplane', 'kubernetes');
}

/** The version a program reports: `Kubernetes v1.36.3` (components), `Client Version: v1.36.3` (kubectl). */
export function programVersion(path: string): string | undefined {
  return path.endsWith('kubectl') ? reportedVersion(path, ['version', '--client'], /^Client Version:\s*v(\S+)/m) : reportedVersion(path, ['--version'], /^Kubernetes\s+v(\S+)/m);
}

/** A directory holding all four programs, each reporting `version`. */
function complete(dir: string, version: string): boolean {
  return KUBERNETES_PROGRAMS.every((program) => {
    const path = join(dir, program);
    return existsSync(path) && programVersion(path) === version;
  });
}

/** Every Kubernetes version installed in the cache (all four programs, each reporting it), oldest first. */
export function listKubernetesVersions(): string[] {
  const cache = kubernetesCacheDir();
  if (!existsSync(cache)) return [];
  return readdirSync(cache)
    .filter((entry) => /^v\d+\.\d+\.\d+$/.test(entry))
    .map((entry) => entry.slice(1))
    .filter((version) => complete(join(cache, `v${version}`, 'usr', 'bin'), version))
    .sort((a, b) => a.localeCompare(b, 'en', { numeric: true }));
}

/**
 * The directory of the programs of `version`: `binaries` (spec.kubernetes.binaries) when given, checked
 * to hold that version, else the installed one. Bad input (exit 2) otherwise, naming what is installed.
 */
export function kubernetesBinDir(version: string, binaries?: string): string {
  if (binaries !== undefined) {
    const wrong = KUBERNETES_PROGRAMS.filter((program) => !existsSync(join(binaries, program)) || programVersion(join(binaries, program)) !== version);
    if (wrong.length > 0) throw new InvalidInputError([`spec.kubernetes.binaries: ${binaries} does not hold Kubernetes ${version} ${wrong.join(', ')} (each must report v${version})`]);
    return binaries;
  }
  const dir = join(kubernetesCacheDir(), `v${version}`, 'usr', 'bin');
  if (complete(dir, version)) return dir;
  const found = listKubernetesVersions();
  throw new InvalidInputError([
    `Kubernetes ${version} is not installed (found: ${found.length > 0 ? found.join(', ') : 'none'}); ` +
      'run `bash scripts/install-kubernetes.sh 1.N` to build a minor, or give a directory holding its kube-apiserver, ' +
      'kube-controller-manager, kube-scheduler and kubectl (spec.kubernetes.binaries)',
  ]);
}

/** The path of one program of `version`. */
export function findKubernetesProgram(program: KubernetesProgram, version: string, binaries?: string): string {
  return join(kubernetesBinDir(version, binaries), program);
}

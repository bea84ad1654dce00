import { execFile } from 'node:child_process';
import { InvalidInputError } from '../../api/errors.ts';
import { findKubernetesProgram, listKubernetesVersions } from './kubernetes-binaries.ts';

/** kubectl failed: what it said on stderr. */
export class KubectlError extends Error {
  override name = 'KubectlError';
}

/** The kubectl to run when none is given: the newest installed Kubernetes's. */
export function installedKubectl(): string {
  const newest = listKubernetesVersions().at(-1);
  if (newest === undefined) throw new InvalidInputError(['--kubectl: no Kubernetes is installed; give a kubectl (--kubectl PATH) or run `bash scripts/install-kubernetes.sh 1.N`']);
  return findKubernetesProgram('kubectl', newest);
}

/** Runs kubectl on a kubeconfig with `input` on its stdin; its stdout, or a KubectlError with its stderr. */
export function runKubectl(kubectl: string, kubeconfig: string, args: readonly string[], input = '', timeoutMs = 60_000): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(kubectl, ['--kubeconfig', kubeconfig, `--request-timeout=${String(Math.ceil(timeoutMs / 1000))}s`, ...args], { timeout: timeoutMs + 5_000 }, (error, stdout, stderr) => {
      if (error === null) resolve(stdout);
      else reject(new KubectlError(`kubectl ${args.join(' ')}: ${stderr.trim() || error.message}`, { cause: error }));
    });
    child.stdin?.end(input);
  });
}

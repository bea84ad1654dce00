import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { controlPlaneCrd, CRD_NAME, renderCrds } from '../../api/crd.ts';
import { InvalidInputError } from '../../api/errors.ts';
import { renderRbac } from '../../api/rbac.ts';
import { installedKubectl, runKubectl } from '../../adapters/kubernetes/kubectl.ts';
import { parseDuration } from '../../api/duration.ts';
import { EXIT } from '../exit-codes.ts';

/** `fastplane crds`: the CustomResourceDefinitions, generated from the manifest schema, on stdout. */
export function crdsCommand(flags: { output: string }): number {
  if (flags.output !== 'yaml' && flags.output !== 'json') throw new InvalidInputError([`-o: must be yaml or json, got ${flags.output}`]);
  process.stdout.write(flags.output === 'json' ? `${JSON.stringify(controlPlaneCrd(), null, 2)}\n` : renderCrds());
  return EXIT.converged;
}

export interface InstallFlags {
  kubeconfig?: string;
  kubectl?: string;
  timeout: string;
}

/**
 * `fastplane install --kubeconfig FILE`: applies the CRDs and the controller's RBAC (src/api/rbac.ts) with
 * kubectl and waits until the API server serves the CRDs (Established).
 */
export async function installCommand(flags: InstallFlags): Promise<number> {
  if (flags.kubeconfig === undefined) throw new InvalidInputError(['--kubeconfig: give the kubeconfig of the cluster to install into (--kubeconfig FILE)']);
  const timeoutMs = parseDuration(flags.timeout);
  if (timeoutMs === undefined) throw new InvalidInputError([`--timeout: must be a duration such as 60s, got ${flags.timeout}`]);
  const kubectl = flags.kubectl ?? installedKubectl();
  // kubectl runs twice; a kubeconfig given as a pipe (`<(fastplane kubeconfig mgmt)`) reads only once.
  let piped: boolean;
  try {
    piped = !statSync(flags.kubeconfig).isFile();
  } catch (error) {
    throw new InvalidInputError([`--kubeconfig: cannot read ${flags.kubeconfig}: ${error instanceof Error ? error.message : String(error)}`]);
  }
  const copyDir = piped ? mkdtempSync(join(tmpdir(), 'fastplane-install-')) : undefined;
  const kubeconfig = copyDir === undefined ? flags.kubeconfig : join(copyDir, 'kubeconfig');
  if (copyDir !== undefined) writeFileSync(kubeconfig, readFileSync(flags.kubeconfig), { mode: 0o600 });
  try {
    process.stdout.write(await runKubectl(kubectl, kubeconfig, ['apply', '-f', '-'], `${renderCrds()}---\n${renderRbac()}`, timeoutMs));
    process.stdout.write(await runKubectl(kubectl, kubeconfig, ['wait', '--for=condition=Established', `crd/${CRD_NAME}`, `--timeout=${String(Math.ceil(timeoutMs / 1000))}s`], '', timeoutMs));
  } finally {
    if (copyDir !== undefined) rmSync(copyDir, { recursive: true, force: true });
  }
  return EXIT.converged;
}

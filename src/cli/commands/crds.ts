import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { controlPlaneCrd, CRD_NAME, renderCrds } from '../../api/crd.ts';
import { InvalidInputError } from '../../api/errors.ts';
import { kcpCrdForFastplane, KCP_CRD_NAME } from '../../api/kcp/kcp-crd.ts';
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
  kubeadmControlPlaneCrd?: string;
}

/** The KubeadmControlPlane CRD file (from Cluster API's Go module), as JSON for kubectl, served as v1beta2 only. */
function kcpCrdFrom(file: string): string {
  let docs: unknown[];
  try {
    docs = parseAllDocuments(readFileSync(file, 'utf8')).map((doc) => doc.toJS() as unknown).filter((doc) => doc !== null);
  } catch (error) {
    throw new InvalidInputError([`--kubeadm-control-plane-crd: cannot read ${file}: ${error instanceof Error ? error.message : String(error)}`]);
  }
  if (docs.length !== 1) throw new InvalidInputError([`--kubeadm-control-plane-crd: ${file}: must hold one CustomResourceDefinition, found ${String(docs.length)} documents`]);
  return JSON.stringify(kcpCrdForFastplane(docs[0], file));
}

/**
 * `fastplane install --kubeconfig FILE`: applies the CRDs and the controller's RBAC (src/api/rbac.ts) with
 * kubectl and waits until the API server serves the CRDs (Established); with
 * --kubeadm-control-plane-crd, Cluster API's KubeadmControlPlane CRD too (src/api/kcp/kcp-crd.ts).
 */
export async function installCommand(flags: InstallFlags): Promise<number> {
  if (flags.kubeconfig === undefined) throw new InvalidInputError(['--kubeconfig: give the kubeconfig of the cluster to install into (--kubeconfig FILE)']);
  const timeoutMs = parseDuration(flags.timeout);
  if (timeoutMs === undefined) throw new InvalidInputError([`--timeout: must be a duration such as 60s, got ${flags.timeout}`]);
  const kcpCrd = flags.kubeadmControlPlaneCrd === undefined ? undefined : kcpCrdFrom(flags.kubeadmControlPlaneCrd);
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
    // Server-side: the CRD is larger than the 256 KiB of annotations client-side apply keeps a copy of it in;
    // without --force-conflicts, so a CRD that Cluster API itself installed (with its webhook) is left alone.
    if (kcpCrd !== undefined) process.stdout.write(await runKubectl(kubectl, kubeconfig, ['apply', '--server-side', '--field-manager=fastplane', '-f', '-'], kcpCrd, timeoutMs));
    const crds = kcpCrd === undefined ? [`crd/${CRD_NAME}`] : [`crd/${CRD_NAME}`, `crd/${KCP_CRD_NAME}`];
    process.stdout.write(await runKubectl(kubectl, kubeconfig, ['wait', '--for=condition=Established', ...crds, `--timeout=${String(Math.ceil(timeoutMs / 1000))}s`], '', timeoutMs));
  } finally {
    if (copyDir !== undefined) rmSync(copyDir, { recursive: true, force: true });
  }
  return EXIT.converged;
}

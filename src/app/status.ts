import { listBackups } from '../care/backup/backup-files.ts';
import { observe } from '../cluster/observe.ts';
import { plan } from '../planner/plan.ts';
import { toPlannerSpec } from '../planner/spec.ts';
import { buildStatus, nextConditions, type ControlPlaneStatusDocument } from '../reconciler/status.ts';
import { controlPlaneRecord } from './records.ts';
import type { Convergence } from '../reconciler/converge.ts';
import type { Decision, Observed } from '../planner/types.ts';
import type { ClusterPorts, Runtime } from './runtime.ts';

/** The status as etcd and the records show it now. Reads only: safe beside a running reconcile. */
export async function statusOf(runtime: Runtime, name: string): Promise<ControlPlaneStatusDocument> {
  const cp = await controlPlaneRecord(runtime, name);
  return statusDocument(await runtime.clusterPorts(cp.manifest));
}

/**
 * The status after a run: on the last pass's observation and decision when that pass did nothing that
 * would change them (a converged pass acts on nothing), else on a fresh look.
 */
export function statusAfter(ports: ClusterPorts, run: Convergence): Promise<ControlPlaneStatusDocument> {
  const last = run.lastPass;
  return statusDocument(ports, last === undefined || acted(last.decision) ? undefined : last);
}

function acted(decision: Decision): boolean {
  return decision.membershipAction !== undefined || decision.machineActions.length > 0 || (decision.careActions?.length ?? 0) > 0;
}

/** The document from the records as they are now and one look: the given one, or a pass's look without its writes and actions. */
async function statusDocument(ports: ClusterPorts, look?: { observed: Observed; decision: Decision }): Promise<ControlPlaneStatusDocument> {
  const { cluster, store } = ports;
  const cp = await store.getControlPlane(cluster);
  if (!cp) throw new Error(`control plane ${cluster} has no record`);
  const observed = look?.observed ?? (await observe(ports));
  const now = Date.now();
  const decision = look?.decision ?? plan(toPlannerSpec(cp.manifest), observed, now);
  const conditions = nextConditions(cp.conditions, decision.conditions, now);
  const lease = await store.getLease(cluster);
  return buildStatus(cp, await store.listMachines(cluster), observed, decision, conditions, ports.provider.clientTls(cluster), lease?.holder);
}

/** The status of every control plane on record. */
export async function statusOfAll(runtime: Runtime): Promise<ControlPlaneStatusDocument[]> {
  const docs: ControlPlaneStatusDocument[] = [];
  for (const cp of await runtime.store.listControlPlanes()) docs.push(await statusOf(runtime, cp.name));
  return docs;
}

/**
 * For `status --explain` of a cluster that lost quorum: when the stopped members cannot start again
 * (their disks are gone), waiting never ends; say which commands end it, with the latest backup.
 */
export async function recoveryHint(runtime: Runtime, doc: ControlPlaneStatusDocument): Promise<string[]> {
  if (!doc.status.waits.some((w) => w.code === 'QuorumLost')) return [];
  const latest = (await listBackups(runtime.stateDir, doc.name)).at(-1);
  return [
    `if the stopped members cannot start again (data lost), run fastplane recover ${doc.name} to see the survivors and the plan, then fastplane recover ${doc.name} --yes`,
    latest === undefined
      ? `no backup of ${doc.name} exists to restore from instead`
      : `or restore the latest backup (revision ${String(latest.revision)}, ${latest.takenAt}): fastplane restore ${doc.name} --from ${latest.file} --replace`,
  ].map((line) => `  hint: ${line}`);
}

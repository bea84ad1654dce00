import { listBackups } from '../care/backup/backup-files.ts';
import { observe } from '../cluster/observe.ts';
import { plan } from '../planner/plan.ts';
import { toPlannerSpec } from '../planner/spec.ts';
import { buildStatus, nextConditions, type ControlPlaneStatusDocument } from '../reconciler/status.ts';
import { controlPlaneRecord } from './records.ts';
import type { Runtime } from './runtime.ts';

/** The status as etcd and the records show it now. Reads only: safe beside a running reconcile. */
export async function statusOf(runtime: Runtime, name: string): Promise<ControlPlaneStatusDocument> {
  const cp = await controlPlaneRecord(runtime, name);
  const observed = await observe(await runtime.observeDeps(cp.manifest));
  const now = Date.now();
  const decision = plan(toPlannerSpec(cp.manifest), observed, now);
  const conditions = nextConditions(cp.conditions, decision.conditions, now);
  const lease = await runtime.store.getLease(name);
  return buildStatus(cp, await runtime.store.listMachines(name), observed, decision, conditions, runtime.provider(cp.manifest).clientTls(name), lease?.holder);
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

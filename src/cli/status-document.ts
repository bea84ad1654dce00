import { InvalidInputError } from '../api/errors.ts';
import { plan } from '../planner/plan.ts';
import { toPlannerSpec } from '../planner/spec.ts';
import { observe } from '../cluster/observe.ts';
import { buildStatus, nextConditions, type ControlPlaneStatusDocument } from '../reconciler/status.ts';
import type { CliContext } from './context.ts';

// Apart from reconcile.ts and spec-flags.ts, so `status` loads neither manifest parsing (zod, the KubeadmControlPlane
// conversion) nor the reconcile path: it is the command run most often, in scripts and by hand.

/** The status as etcd and the records show it now. Reads only: safe beside a running reconcile. */
export async function statusOf(ctx: CliContext, name: string): Promise<ControlPlaneStatusDocument> {
  const cp = await ctx.store.getControlPlane(name);
  if (!cp) throw new InvalidInputError([`no control plane named ${name} in ${ctx.storeLocation}`]);
  const observed = await observe(await ctx.observeDeps(cp.manifest));
  const now = Date.now();
  const decision = plan(toPlannerSpec(cp.manifest), observed, now);
  const conditions = nextConditions(cp.conditions, decision.conditions, now);
  const lease = await ctx.store.getLease(name);
  return buildStatus(cp, await ctx.store.listMachines(name), observed, decision, conditions, ctx.provider(cp.manifest).clientTls(name), lease?.holder);
}

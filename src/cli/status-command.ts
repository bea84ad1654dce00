import { InvalidInputError } from '../api/errors.ts';
import { plan } from '../planner/plan.ts';
import { toPlannerSpec } from '../planner/spec.ts';
import { observe } from '../reconciler/observe.ts';
import { buildStatus, nextConditions, type ControlPlaneStatusDocument } from '../reconciler/status.ts';
import type { CliContext } from './context.ts';
import { EXIT } from './exit-codes.ts';
import { recoveryHint } from './recovery-hint.ts';
import { explain, parseOutput, render } from './render.ts';

// Apart from commands.ts, so `status` loads neither manifest parsing (zod, the KubeadmControlPlane
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

export async function statusCommand(ctx: CliContext, name: string | undefined, flags: { output: string; explain?: boolean }): Promise<number> {
  const format = parseOutput(flags.output);
  // A cluster that lost its majority for good: explain points to recover and to the latest backup.
  const explained = async (doc: ControlPlaneStatusDocument): Promise<string> => [explain(doc), ...(await recoveryHint(ctx.stateDir, doc))].join('\n');
  if (name !== undefined) {
    const doc = await statusOf(ctx, name);
    process.stdout.write(`${flags.explain === true ? await explained(doc) : render(doc, format)}\n`);
    return EXIT.converged;
  }
  const docs: ControlPlaneStatusDocument[] = [];
  for (const cp of await ctx.store.listControlPlanes()) docs.push(await statusOf(ctx, cp.name));
  process.stdout.write(`${flags.explain === true ? (await Promise.all(docs.map(explained))).join('\n') : render(docs, format)}\n`);
  return EXIT.converged;
}

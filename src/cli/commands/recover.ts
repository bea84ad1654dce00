import { InvalidInputError } from '../../api/errors.ts';
import { BlockedError } from '../../care/blocked-error.ts';
import { describePlan, HasQuorumError, type RecoveryPlan } from '../../care/recover.ts';
import { runUntilSettled } from '../../reconciler/run.ts';
import { careFor } from '../care.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { underLeaseOrBlocked } from '../lease.ts';
import { OUTCOME_EXIT } from '../reconcile.ts';
import { parseTimeout, storedManifest } from '../spec-flags.ts';

export interface RecoverFlags {
  yes?: boolean;
  timeout: string;
}

/**
 * `recover NAME`: prints the survivors and the plan; with --yes carries it out (the stopped voters
 * restarted, or the chosen survivor forced into a one-member cluster) and converges back to `replicas`,
 * all under the cluster's lease. A cluster with quorum is bad input (exit 2): recovery would throw
 * committed data away for nothing.
 */
export async function recoverCommand(ctx: CliContext, name: string, flags: RecoverFlags): Promise<number> {
  const timeoutMs = parseTimeout(flags.timeout);
  const startedAt = Date.now();
  const manifest = await storedManifest(ctx, name);
  const care = careFor(ctx, manifest);
  const refusingQuorum = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      if (error instanceof HasQuorumError) throw new InvalidInputError([`recover ${name}: ${error.message}`]);
      throw error;
    }
  };
  // Surveyed before the lease is asked for: a healthy cluster is refused without stopping anyone.
  let plan: RecoveryPlan;
  try {
    plan = await refusingQuorum(() => care.surveyRecovery());
  } catch (error) {
    if (!(error instanceof BlockedError)) throw error;
    process.stderr.write(`error: ${error.message}\n`);
    return EXIT.blocked;
  }
  if (flags.yes !== true) {
    process.stdout.write(`${describePlan(plan).join('\n')}\n`);
    process.stderr.write(`nothing changed: run fastplane recover ${name} --yes to carry out this plan\n`);
    return EXIT.blocked;
  }
  const outcome = await underLeaseOrBlocked(ctx, name, 'recovery', async (writer) => {
    const { plan: current, done } = await refusingQuorum(() =>
      care.recover(writer, (surveyed) => {
        process.stdout.write(`${describePlan(surveyed).join('\n')}\n`);
      }),
    );
    process.stdout.write(
      done === 'restarted'
        ? `quorum is back: ${current.restart.join(', ')} restarted from their data dirs, nothing forced; converging to ${String(current.replicas)}\n`
        : `${current.chosen.machine} runs as a one-member cluster; scaling back to ${String(current.replicas)}\n`,
    );
    const generation = (await ctx.store.getControlPlane(name))?.generation;
    const result = await runUntilSettled((await ctx.depsFor(manifest))(writer), { deadline: startedAt + timeoutMs, ...(generation === undefined ? {} : { generation }) });
    return result.outcome;
  });
  if (outcome === undefined) return EXIT.blocked;
  process.stdout.write(`recovery of ${name}: ${outcome}\n`);
  return OUTCOME_EXIT[outcome];
}

import { recover, surveyRecovery } from '../../app/recover.ts';
import { describePlan, type RecoveryPlan } from '../../care/recover.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { OUTCOME_EXIT } from '../reconcile.ts';
import { parseTimeout } from '../spec-flags.ts';

export interface RecoverFlags {
  yes?: boolean;
  acceptUnreachable?: boolean;
  timeout: string;
}

function printPlan(plan: RecoveryPlan): void {
  process.stdout.write(`${describePlan(plan).join('\n')}\n`);
}

/**
 * `recover NAME`: prints the survivors and the plan; with --yes carries it out and converges back to
 * `replicas`, under the cluster's lease. A cluster with quorum is bad input (exit 2).
 */
export async function recoverCommand(ctx: CliContext, name: string, flags: RecoverFlags): Promise<number> {
  const deadline = Date.now() + parseTimeout(flags.timeout);
  // Surveyed before the lease is asked for: a healthy cluster is refused without stopping anyone.
  const options = { acceptUnreachable: flags.acceptUnreachable === true };
  const survey = await surveyRecovery(ctx, name, options);
  if ('blocked' in survey) {
    process.stderr.write(`error: ${survey.blocked}\n`);
    return EXIT.blocked;
  }
  if (flags.yes !== true) {
    printPlan(survey.plan);
    process.stderr.write(`nothing changed: run fastplane recover ${name} --yes to carry out this plan\n`);
    return EXIT.blocked;
  }
  const recovery = await recover(ctx, name, deadline, printPlan, (text) => process.stdout.write(`${text}\n`), options);
  if (!recovery.done) {
    process.stderr.write(`error: ${recovery.message}\n`);
    return EXIT.blocked;
  }
  process.stdout.write(`recovery of ${name}: ${recovery.value.outcome}\n`);
  return OUTCOME_EXIT[recovery.value.outcome];
}

import { join } from 'node:path';
import type { ControlPlane } from '../api/control-plane.ts';
import { InvalidInputError } from '../api/errors.ts';
import { committedIndexOf } from '../adapters/etcd/wal-commit.ts';
import { describePlan, carryOutRecovery, HasQuorumError, surveyRecovery, type RecoverDeps, type RecoveryPlan } from '../dr/recover.ts';
import { BlockedError } from '../care/blocked-error.ts';
import { systemClock } from '../ports/clock.ts';
import { runUntilSettled } from '../reconciler/run.ts';
import type { EtcdClients as DayTwoClients } from '../care/care-service.ts';
import { underLeaseWithClients, withClients } from './lease.ts';
import { OUTCOME_EXIT } from './reconcile.ts';
import { parseTimeout, storedManifest } from './spec-flags.ts';
import { EXIT } from './exit-codes.ts';
import type { CliContext } from './context.ts';

/**
 * Where the local provider keeps a machine's data dir on this host (its `clusters/<name>/machines/<machine>/data`),
 * so stopped members are read offline; an ssh provider's data dirs are on their hosts, not read here.
 */
function offlineReader(ctx: CliContext, manifest: ControlPlane): RecoverDeps['committedIndexOffline'] {
  if (manifest.spec.provider.name !== 'local-process') return undefined;
  const name = manifest.metadata.name;
  return (machine) => committedIndexOf(join(ctx.stateDir, 'clusters', name, 'machines', machine, 'data'));
}

export interface RecoverFlags {
  yes?: boolean;
  timeout: string;
}

/**
 * `recover NAME`: prints the survivors and the plan; with --yes forces the chosen survivor into a
 * one-member cluster and converges back to `replicas`, all under the cluster's lease. A cluster with
 * quorum is bad input (exit 2): recovery would throw committed data away for nothing.
 */
export async function recoverCommand(ctx: CliContext, name: string, flags: RecoverFlags): Promise<number> {
  const timeoutMs = parseTimeout(flags.timeout);
  const startedAt = Date.now();
  const manifest = await storedManifest(ctx, name);
  const committedIndexOffline = offlineReader(ctx, manifest);
  const depsOf = ({ admin, maintenance }: DayTwoClients): RecoverDeps => ({
    cluster: name,
    store: ctx.store,
    provider: ctx.provider(manifest),
    admin,
    maintenance,
    clock: systemClock,
    ...(committedIndexOffline === undefined ? {} : { committedIndexOffline }),
  });
  const survey = async (deps: RecoverDeps): Promise<RecoveryPlan> => {
    try {
      return await surveyRecovery(deps);
    } catch (error) {
      if (error instanceof HasQuorumError) throw new InvalidInputError([`recover ${name}: ${error.message}`]);
      throw error;
    }
  };
  // Surveyed before the lease is asked for: a healthy cluster is refused without stopping anyone.
  let plan: RecoveryPlan;
  try {
    plan = await withClients(ctx, manifest, (clients) => survey(depsOf(clients)));
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
  const outcome = await underLeaseWithClients(ctx, manifest, 'recovery', async (clients, writer) => {
    const deps = depsOf(clients);
    // Surveyed again under the lease: a reconcile that ran meanwhile may have changed the survivors.
    const current = await survey(deps);
    process.stdout.write(`${describePlan(current).join('\n')}\n`);
    const done = await carryOutRecovery(deps, writer, current);
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

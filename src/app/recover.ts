import { InvalidInputError } from '../api/errors.ts';
import { BlockedError } from '../care/blocked-error.ts';
import { HasQuorumError, type RecoveryPlan } from '../care/recover.ts';
import type { RecoverOptions } from '../care/care-service.ts';
import { runUntilSettled, type RunOutcome } from '../reconciler/run.ts';
import { underClusterLease, type LeaseWork } from './lease.ts';
import { storedManifest } from './records.ts';
import type { Note, Runtime } from './runtime.ts';

/** A cluster with quorum is bad input: recovery would throw committed data away for nothing. */
async function refusingQuorum<T>(name: string, work: () => Promise<T>): Promise<T> {
  try {
    return await work();
  } catch (error) {
    if (error instanceof HasQuorumError) throw new InvalidInputError([`recover ${name}: ${error.message}`]);
    throw error;
  }
}

/** Reads only: the survivors and what recovery would do, or why no plan can be made (a gate). */
export async function surveyRecovery(runtime: Runtime, name: string, options: RecoverOptions = {}): Promise<{ plan: RecoveryPlan } | { blocked: string }> {
  const care = runtime.care(await storedManifest(runtime, name));
  try {
    return { plan: await refusingQuorum(name, () => care.surveyRecovery(options)) };
  } catch (error) {
    if (!(error instanceof BlockedError)) throw error;
    return { blocked: error.message };
  }
}

export interface Recovery {
  plan: RecoveryPlan;
  done: 'restarted' | 'forced';
  outcome: RunOutcome;
}

/**
 * Under the cluster's lease: surveys again (a reconcile may have run meanwhile), shows the plan
 * through `onPlan`, carries it out (the stopped voters restarted, or the chosen survivor forced into a
 * one-member cluster), then converges back to `replicas` by `deadline`.
 */
export async function recover(runtime: Runtime, name: string, deadline: number, onPlan: (plan: RecoveryPlan) => void, onNote: Note, options: RecoverOptions = {}): Promise<LeaseWork<Recovery>> {
  const manifest = await storedManifest(runtime, name);
  const care = runtime.care(manifest);
  return underClusterLease(
    runtime,
    name,
    'recovery',
    async (writer) => {
      const { plan, done } = await refusingQuorum(name, () => care.recover(writer, onPlan, options));
      onNote(
        done === 'restarted'
          ? `quorum is back: ${plan.restart.join(', ')} restarted from their data dirs, nothing forced; converging to ${String(plan.replicas)}`
          : `${plan.chosen.machine} runs as a one-member cluster; scaling back to ${String(plan.replicas)}`,
      );
      const generation = (await runtime.store.getControlPlane(name))?.generation;
      const result = await runUntilSettled(runtime.passDeps(await runtime.clusterPorts(manifest))(writer), { deadline, ...(generation === undefined ? {} : { generation }) });
      return { plan, done, outcome: result.outcome };
    },
    onNote,
  );
}

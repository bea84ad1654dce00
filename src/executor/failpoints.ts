import { InvalidInputError } from '../api/errors.ts';

/**
 * Named points between two side effects of a multi-step action: a crash there leaves the first done
 * and the second not, the state crash recovery must handle. Tests arm them through the
 * FASTPLANE_FAILPOINTS environment variable (comma-separated names, test hooks on) and the process
 * kills itself there with SIGKILL.
 */
export const FAILPOINTS = [
  /** Machine record and ordinal stored; the provider not asked yet. */
  'after-create-record',
  /** The provider created the machine; its address not recorded yet. */
  'after-provider-create',
  /** initMachine recorded; the init member not started. */
  'after-init-record',
  /** The init member started; nothing recorded about it yet. */
  'after-init-start',
  /** etcd added the learner; its member ID not recorded yet. */
  'after-add-learner-call',
  /** The learner's member ID recorded; its process not started. */
  'after-add-learner',
  'before-start-member',
  'after-start-member',
  'after-promote',
  'after-move-leader',
  'after-remove-member',
  /** The member is gone from etcd; the machine not deleted yet. */
  'before-delete-machine',
  /** The provider deleted (or started deleting) the machine; its record not removed yet. */
  'after-provider-delete',
  /** A rolling care job recorded where it got, not ended; the next pass not run. */
  'after-care-step',
] as const;

export type FailpointName = (typeof FAILPOINTS)[number];

/**
 * Failpoints of day-2 care, which runs only against real etcd (the simulator plans no care): the
 * end-to-end tests kill there, the simulator's crash properties cover the rest.
 */
export const CARE_FAILPOINTS: readonly FailpointName[] = ['after-care-step'];

export type FailpointHook = (name: FailpointName) => void;

const noFailpoints: FailpointHook = () => undefined;

/** The armed failpoints named by `list`; an unknown name is an input error, never ignored. */
export function failpointsFrom(list: string | undefined): FailpointHook {
  const armed = new Set((list ?? '').split(',').map((s) => s.trim()).filter(Boolean));
  const unknown = [...armed].filter((name) => !(FAILPOINTS as readonly string[]).includes(name));
  if (unknown.length > 0) throw new InvalidInputError([`FASTPLANE_FAILPOINTS: unknown failpoint ${unknown.join(', ')}; known: ${FAILPOINTS.join(', ')}`]);
  if (armed.size === 0) return noFailpoints;
  return (name) => {
    if (armed.has(name)) process.kill(process.pid, 'SIGKILL');
  };
}

/** What an in-process failpoint throws (the simulator's crash): the executor never swallows it. */
export class FailpointCrash extends Error {
  override readonly name = 'FailpointCrash';
}

/**
 * Named points between two side effects of a multi-step action. Tests arm one through the
 * FASTPLANE_FAILPOINTS environment variable (comma-separated names) and the process kills itself
 * there with SIGKILL, so crash recovery is tested at exactly the dangerous places.
 */
export const FAILPOINTS = [
  'after-create-record',
  'after-init-record',
  'after-add-learner',
  'before-start-member',
  'after-start-member',
  'after-promote',
  'after-move-leader',
  'after-remove-member',
  'before-delete-machine',
] as const;

export type FailpointName = (typeof FAILPOINTS)[number];

export type FailpointHook = (name: FailpointName) => void;

export function failpointsFromEnv(env: NodeJS.ProcessEnv = process.env): FailpointHook {
  const armed = new Set((env.FASTPLANE_FAILPOINTS ?? '').split(',').map((s) => s.trim()).filter(Boolean));
  if (armed.size === 0) return () => undefined;
  return (name) => {
    if (armed.has(name)) process.kill(process.pid, 'SIGKILL');
  };
}

/** What an in-process failpoint throws (the simulator's crash): the executor never swallows it. */
export class FailpointCrash extends Error {
  override readonly name = 'FailpointCrash';
}

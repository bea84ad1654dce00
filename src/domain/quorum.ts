/** Raft quorum for n voters. */
export function quorum(voters: number): number {
  return Math.floor(voters / 2) + 1;
}

/**
 * Whether a membership change keeps enough healthy voters for the voter set it produces (invariant 4).
 * `healthyDelta` is how the change moves the healthy count: removing a healthy voter is -1, removing a
 * dead one 0, promoting a learner that has proven itself +1. A new member counts as unhealthy until
 * proven otherwise, so callers pass 0 for anything unproven.
 */
export function keepsQuorum(voters: number, healthyVoters: number, votersDelta: number, healthyDelta: number): boolean {
  const nextVoters = voters + votersDelta;
  if (nextVoters < 1) return false;
  return healthyVoters + healthyDelta >= quorum(nextVoters);
}

/**
 * etcd's HealthInterval: with its reconfiguration check on, etcd takes an add only once the voters it
 * counts have been connected to the leader this long (the 5 s rule, docs/etcd-behaviour.md).
 */
export const PEER_CONNECTED_FOR_ADD_MS = 5_000;

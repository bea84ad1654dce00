import type { MembershipAction } from '../planner/types.ts';

/** Event actions that change etcd's membership: what bench times and the report draws as markers. */
export const MEMBERSHIP_ACTIONS: ReadonlySet<string> = new Set<MembershipAction['kind']>(['InitCluster', 'AddLearner', 'StartMember', 'PromoteLearner', 'MoveLeader', 'RemoveMember']);

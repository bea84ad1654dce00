import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { readCluster, type ClusterReading } from '../../src/care/rolling.ts';
import { agreedLeader, isHealthyVoter, mayStopVoter, votersHoldQuorum } from '../../src/planner/health.ts';
import { plan } from '../../src/planner/plan.ts';
import type { ObservedMachine, ObservedMember } from '../../src/planner/types.ts';
import { buildView } from '../../src/planner/view.ts';
import type { EtcdAdmin, EtcdMember, EtcdMemberStatus } from '../../src/ports/etcd-admin.ts';
import { clientURLOf, learner, machine, memberIdOf, NOW, observed, spec, voter } from '../support/observed.ts';
import { RUNS } from './arbitraries.ts';

/**
 * The planner and day-2 care judge the same cluster alike: on generated clusters (voters and learners,
 * members answering or not, naming a voter, no leader or a stranger, in various terms, on running or
 * stopped machines), the planner's verdicts (quorum lost as plan() reports it, the leader and which
 * voter may stop, as its view reads them) equal care's (as rolling restarts read the same members
 * through etcd's API).
 */

const memberArb = fc.record({
  running: fc.constantFrom(true, true, true, false),
  /** Whether a running member answers its status (one cut off or slow does not). */
  answers: fc.constantFrom(true, true, true, false),
  /** Whom its status names: a voter by index, no leader ('0'), or a member not in the cluster. */
  claim: fc.oneof(fc.nat({ max: 6 }), fc.constant('none' as const), fc.constant('stranger' as const)),
  term: fc.integer({ min: 2, max: 4 }),
});
const clusterArb = fc.record({
  voters: fc.array(memberArb, { minLength: 1, maxLength: 7 }),
  learners: fc.array(memberArb, { maxLength: 2 }),
});

interface Generated {
  running: boolean;
  answers: boolean;
  claim: number | 'none' | 'stranger';
  term: number;
}

interface World {
  machines: ObservedMachine[];
  members: ObservedMember[];
  /** What etcd's API answers, as care asks it. */
  admin: EtcdAdmin;
}

function worldOf(voters: Generated[], learners: Generated[]): World {
  const names = [...voters, ...learners].map((_, i) => `t-${String(i + 1)}`);
  const leaderOf = (m: Generated): string => (m.claim === 'none' ? '0' : m.claim === 'stranger' ? memberIdOf('t-99') : memberIdOf(names[m.claim % voters.length] ?? 't-1'));
  const statuses = new Map<string, EtcdMemberStatus>();
  const members = [...voters, ...learners].map((m, i) => {
    const name = names[i] ?? '';
    const isLearner = i >= voters.length;
    const make = isLearner ? learner : voter;
    // A stopped member answers nothing: care and the planner see the same silence.
    if (!m.running || !m.answers) return make(name, { statusError: 'context deadline exceeded' });
    const member = make(name, { leader: leaderOf(m) });
    if (member.status?.ok === true) {
      member.status.status.raftTerm = m.term;
      statuses.set(clientURLOf(name), member.status.status);
    }
    return member;
  });
  const machines = [...voters, ...learners].map((m, i) => machine(names[i] ?? '', { phase: i < voters.length ? 'Voter' : 'Learner', memberRunning: m.running }));
  const list: EtcdMember[] = members.map(({ id, name, peerURLs, clientURLs, isLearner }) => ({ id, name, peerURLs, clientURLs, isLearner }));
  const admin = {
    memberList: () => Promise.resolve(list),
    status: (endpoint: string) => {
      const status = statuses.get(endpoint);
      return status ? Promise.resolve(status) : Promise.reject(new Error('context deadline exceeded'));
    },
  } as unknown as EtcdAdmin;
  return { machines, members, admin };
}

const verdictOf = (v: ReturnType<typeof mayStopVoter>): string => (v.ok ? 'ok' : v.code);

test("the planner's and care's health verdicts agree on every generated cluster", async () => {
  await fc.assert(
    fc.asyncProperty(clusterArb, async ({ voters, learners }) => {
      const world = worldOf(voters, learners);
      const observation = observed({ machines: world.machines, members: world.members });
      const desired = spec({ replicas: voters.length });
      const view = buildView(desired, observation, NOW);
      const decision = plan(desired, observation, NOW);
      const care: ClusterReading = await readCluster(world.admin, [clientURLOf('t-1')]);
      const context = JSON.stringify({ voters, learners });

      assert.equal(decision.blocked?.code === 'QuorumLost', !votersHoldQuorum(care.gate), `quorum: ${context}`);
      assert.equal(view.leaderId, agreedLeader(care.gate), `leader: ${context}`);
      const planWouldRoll = view.learners.length === 0 && view.leaderId !== undefined && view.healthyVoters.length === view.voters.length;
      const careWouldRoll = care.learners.length === 0 && agreedLeader(care.gate) !== undefined && care.gate.every(isHealthyVoter);
      assert.equal(planWouldRoll, careWouldRoll, `a rolling restart may start: ${context}`);
      const learnerNames = view.learners.map((l) => l.name || l.id);
      for (const v of view.voters) {
        const planned = verdictOf(mayStopVoter(view.voters.map(view.readingOf), learnerNames, v.id));
        assert.equal(planned, verdictOf(mayStopVoter(care.gate, care.learners, v.id)), `stopping ${v.name}: ${context}`);
      }
    }),
    { numRuns: RUNS },
  );
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { validateControlPlane } from '../../src/api/control-plane.ts';
import { quorum } from '../../src/domain/quorum.ts';
import { ELECTION_TIMEOUT_MS } from '../../src/planner/guard.ts';
import { plan } from '../../src/planner/plan.ts';
import { toPlannerSpec } from '../../src/planner/spec.ts';
import type { ObservedMachine, ObservedMember, VoterReading } from '../../src/planner/types.ts';
import { learner, machine, memberIdOf, NOW, observed, RAFT_INDEX, spec, voter } from '../support/observed.ts';
import { RUNS } from './arbitraries.ts';

/**
 * Guarded reconfiguration, on random observations: whatever membership change the planner decides
 * with etcd's checks off, it passes the rules restated here independently of src/planner/guard.ts:
 * an add only with every voter answering in the leader's term, a promotion only with a quorum of
 * the new size in that term (the learner counted), a voter removal only of a non-leader and only
 * with a quorum of the voters left shown keeping up with the leader across an election timeout. The
 * same holds after a switch back to etcd's checks while a member still runs without them.
 */

const MARGIN = 10;
const GUARDED = toPlannerSpec(validateControlPlane({ apiVersion: 'fastplane.dev/v1alpha1', kind: 'ControlPlane', metadata: { name: 't' }, spec: { etcd: { reconfigurationCheck: 'fastplane' } } }));

const voterArb = fc.record({
  answers: fc.constantFrom(true, true, true, false),
  term: fc.constantFrom(2, 2, 2, 2, 3),
  lag: fc.integer({ min: 0, max: 25 }),
});
const readingArb = fc.record({
  ago: fc.integer({ min: 0, max: 3000 }),
  lags: fc.array(fc.integer({ min: 0, max: 25 }), { minLength: 7, maxLength: 7 }),
  otherLeader: fc.constantFrom(false, false, false, true),
});
const caseArb = fc.record({
  voters: fc.array(voterArb, { minLength: 2, maxLength: 7 }),
  leader: fc.nat({ max: 6 }),
  victim: fc.nat({ max: 6 }),
  readings: fc.array(readingArb, { maxLength: 5 }),
  learnerLag: fc.option(fc.integer({ min: 0, max: 30 }), { nil: undefined }),
  joiner: fc.boolean(),
  remove: fc.boolean(),
  /** The spec says etcd again, but this voter's member was started without etcd's checks (not rolled yet). */
  switchedBack: fc.option(fc.nat({ max: 6 }), { nil: undefined }),
});

test('guarded mode, or switched back while a member still runs without etcd\'s checks: every membership change decided meets the guard rules', () => {
  fc.assert(
    fc.property(caseArb, (c) => {
      const n = c.voters.length;
      const names = c.voters.map((_, i) => `t-${String(i + 1)}`);
      const leaderName = names[c.leader % n] ?? 't-1';
      const leaderId = memberIdOf(leaderName);
      const victimName = names[c.victim % n] ?? 't-1';
      const members: ObservedMember[] = c.voters.map((v, i) => {
        const name = names[i] ?? '';
        if (!v.answers && name !== leaderName) return voter(name, { statusError: 'context deadline exceeded' });
        const m = voter(name, { leader: leaderId, raftIndex: RAFT_INDEX - (name === leaderName ? 0 : v.lag) });
        if (m.status?.ok === true) m.status.status.raftTerm = name === leaderName ? 2 : v.term;
        return m;
      });
      const base = c.switchedBack === undefined ? GUARDED : spec();
      const templateHash = base.templateHash;
      const unchecked = c.switchedBack === undefined ? undefined : names[c.switchedBack % n];
      const machines: ObservedMachine[] = names.map((name) => {
        const m = machine(name, { phase: 'Voter', templateHash, deleteRequested: c.remove && name === victimName });
        return { ...m, record: { ...m.record, strictReconfigCheck: c.switchedBack === undefined ? false : name !== unchecked } };
      });
      let replicas = c.remove ? n - 1 : n;
      if (c.learnerLag !== undefined) {
        machines.push(machine('t-8', { phase: 'Learner', templateHash }));
        members.push(learner('t-8', { leader: leaderId, raftAppliedIndex: RAFT_INDEX - c.learnerLag }));
        replicas++;
      }
      if (c.joiner) {
        machines.push(machine('t-9', { templateHash }));
        replicas++;
      }
      const earlierReadings: VoterReading[] = [...c.readings]
        .sort((a, b) => b.ago - a.ago)
        .map((r) => {
          const statuses: VoterReading['statuses'] = {};
          names.forEach((name, i) => {
            const named = r.otherLeader ? memberIdOf(names[(c.leader + 1) % n] ?? 't-1') : leaderId;
            statuses[memberIdOf(name)] = { leaderId: named, raftTerm: 2, raftIndex: RAFT_INDEX - (name === leaderName ? 0 : (r.lags[i] ?? 0)) };
          });
          return { at: NOW - r.ago, statuses };
        });
      const o = { ...observed({ machines, members }), ...(earlierReadings.length > 0 ? { earlierReadings } : {}) };
      const action = plan(spec({ ...base, replicas, remediation: base.remediation }), o, NOW).membershipAction;
      if (!action) return;

      const status = (m: ObservedMember) => (m.status?.ok === true ? m.status.status : undefined);
      const voters = members.filter((m) => !m.isLearner);
      const inStep = (m: ObservedMember): boolean => status(m)?.leaderId === leaderId && status(m)?.raftTerm === 2;
      const context = JSON.stringify({ action, c });
      if (action.kind === 'AddLearner') {
        assert.ok(voters.every(inStep), `add with a voter out of step: ${context}`);
      }
      if (action.kind === 'PromoteLearner') {
        assert.ok(voters.filter(inStep).length + 1 >= quorum(n + 1), `promotion without quorum in the leader's term: ${context}`);
        assert.ok((c.learnerLag ?? Infinity) <= MARGIN, `promotion of a learner behind: ${context}`);
      }
      if (action.kind === 'RemoveMember' && voters.some((v) => v.id === action.memberId)) {
        assert.notEqual(action.memberId, leaderId, `removed the leader: ${context}`);
        const reference = earlierReadings.filter((r) => NOW - r.at >= ELECTION_TIMEOUT_MS).at(-1);
        assert.ok(reference, `removal without a reading an election timeout old: ${context}`);
        const since = earlierReadings.filter((r) => r.at >= reference.at);
        const rest = voters.filter((v) => v.id !== action.memberId);
        const keptUp = rest.filter(
          (v) =>
            inStep(v) &&
            RAFT_INDEX - (status(v)?.raftIndex ?? -Infinity) <= MARGIN &&
            since.every((r) => r.statuses[v.id]?.leaderId === leaderId && r.statuses[leaderId]?.leaderId === leaderId && RAFT_INDEX - (r.statuses[v.id]?.raftIndex ?? -Infinity) <= MARGIN),
        );
        assert.ok(keptUp.length >= quorum(rest.length), `removal without a connected quorum left: ${context}`);
      }
    }),
    { numRuns: RUNS * 5 },
  );
});

/**
 * A pass-by-pass model of catch-ups through links, for planner tests: three joiners (t-4..t-6) beside
 * three voters, each learner receiving its snapshot at the lower of its own rate and its share of the
 * leader's uplink, its data dir read every pass and recorded as the reconciler does (learnerAdvance).
 */
import type { LearnerProgress } from '../../src/domain/machine.ts';
import { learnerAdvance } from '../../src/planner/learner-progress.ts';
import { plan } from '../../src/planner/plan.ts';
import type { ObservedMember, PlannerSpec } from '../../src/planner/types.ts';
import { healthyCluster, learner, machine, NOW, observed, RAFT_INDEX, voter } from './observed.ts';

const PASS_MS = 200;
/** What etcd preallocates for its WAL when a member starts: the segment and the next. */
const WAL_PREALLOCATED_BYTES = 128_000_000;

export interface CatchUpLinks {
  uplinkBytesPerSecond: number;
  learnerBytesPerSecond: number;
  snapshotBytes: number;
}

export interface CatchUpRun {
  /** The most learners receiving their snapshot in one pass. */
  mostReceiving: number;
  /** The most learners listed in one pass. */
  mostLearners: number;
  /** When the last joiner was promoted, in ms after the start (undefined: not all were). */
  finishedAfterMs: number | undefined;
  /** Every wait the planner gave, as `code: message`, once each. */
  waits: string[];
  promoted: number;
  /** Adds and promotions with their time, for failure messages. */
  timeline: string;
}

interface Joiner {
  name: string;
  added: boolean;
  named: boolean;
  voter: boolean;
  received: number;
  progress?: LearnerProgress;
}

function memberOf(j: Joiner, s: PlannerSpec, snapshotBytes: number): ObservedMember {
  if (j.voter) return voter(j.name, { version: s.version, dbSize: snapshotBytes });
  if (!j.named) return learner(j.name, { unstarted: true });
  return j.received >= snapshotBytes ? learner(j.name, { raftAppliedIndex: RAFT_INDEX, version: s.version }) : learner(j.name, { statusError: 'context deadline exceeded', version: s.version });
}

export function runCatchUps(s: PlannerSpec, links: CatchUpLinks): CatchUpRun {
  const base = healthyCluster(3, { version: s.version, maxLearners: s.maxLearners });
  const joiners: Joiner[] = ['t-4', 't-5', 't-6'].map((name) => ({ name, added: false, named: false, voter: false, received: 0 }));
  const waits = new Set<string>();
  const events: string[] = [];
  let mostReceiving = 0;
  let mostLearners = 0;
  let finishedAfterMs: number | undefined;
  for (let pass = 0, now = NOW; pass < 1000 && joiners.some((j) => !j.voter); pass++, now += PASS_MS) {
    for (const j of joiners) j.named ||= j.added;
    const receiving = joiners.filter((j) => j.named && !j.voter && j.received < links.snapshotBytes);
    const rate = Math.min(links.learnerBytesPerSecond, links.uplinkBytesPerSecond / Math.max(1, receiving.length));
    for (const j of receiving) j.received = Math.min(links.snapshotBytes, j.received + (rate * PASS_MS) / 1000);
    mostReceiving = Math.max(mostReceiving, receiving.length);
    const machines = joiners.map((j) => {
      if (j.voter) return machine(j.name, { phase: 'Voter', version: s.version, maxLearners: s.maxLearners });
      if (!j.added) return machine(j.name, { version: s.version, maxLearners: s.maxLearners });
      return machine(j.name, { phase: 'Joining', version: s.version, maxLearners: s.maxLearners, memberDataBytes: WAL_PREALLOCATED_BYTES + j.received, ...(j.progress ? { learnerProgress: j.progress } : {}) });
    });
    const members = joiners.filter((j) => j.added).map((j) => memberOf(j, s, links.snapshotBytes));
    mostLearners = Math.max(mostLearners, members.filter((m) => m.isLearner).length);
    const voters = base.members.map((m) => voter(m.name, { version: s.version, dbSize: links.snapshotBytes }));
    const o = observed({ machines: [...base.machines, ...machines], members: [...voters, ...members] });
    const d = plan(s, o, now);
    for (const w of d.waits) waits.add(`${w.code}: ${w.message}`);
    // Recorded after the decision, as the reconciler does: the next pass plans with it.
    for (const [i, j] of joiners.entries()) {
      const m = machines[i];
      const member = members.find((x) => x.name === j.name || x.peerURLs[0] === `http://127.77.1.${String(4 + i)}:2380`);
      if (!j.added || j.voter || !m || !member) continue;
      const advance = learnerAdvance(m, member, now);
      if (advance) j.progress = advance;
    }
    const action = d.membershipAction;
    const target = joiners.find((j) => j.name === action?.machine);
    if (!action || !target) continue;
    events.push(`${action.kind} ${target.name} at ${((now - NOW) / 1000).toFixed(1)} s`);
    if (action.kind === 'AddLearner') target.added = true;
    if (action.kind === 'PromoteLearner') target.voter = true;
    if (joiners.every((j) => j.voter)) finishedAfterMs = now - NOW;
  }
  return { mostReceiving, mostLearners, finishedAfterMs, waits: [...waits], promoted: joiners.filter((j) => j.voter).length, timeline: events.join(', ') };
}

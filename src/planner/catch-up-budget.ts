import type { LearnerReceive } from '../domain/machine.ts';
import { RECEIVE_QUIET_MS } from './learner-progress.ts';
import type { Wait } from './types.ts';
import { memberAnswers, type ClusterView } from './view.ts';

/**
 * Below this share of the most it received, the oldest learner receiving is slowed by the catch-ups
 * started beside it: they share the leader's uplink rather than each being limited on its own side.
 */
export const SHARED_UPLINK_SHARE = 0.75;

/**
 * A leader whose database is at most this size sends a learner its snapshot in well under a second
 * even at 100 Mbit/s: catch-ups started beside it cannot hold the first back by more, and measuring a
 * rate would take longer than the transfer. (A Kubernetes control plane's bootstrap objects are a few MB.)
 */
export const PACED_ABOVE_DB_BYTES = 8 * 1024 * 1024;

/** The largest database a voter reports: what a learner's snapshot carries at most. Undefined: none read. */
function largestVoterDb(view: ClusterView): number | undefined {
  const sizes = view.voters.flatMap((m) => (m.status?.ok === true ? [m.status.status.dbSize] : []));
  return sizes.length === 0 ? undefined : Math.max(...sizes);
}

interface Receiver {
  name: string;
  receive: LearnerReceive;
  since: number;
}

/**
 * Learners receiving their snapshot now, oldest first: started (named, its data dir read), answering
 * nothing yet, and their data dir read first or grown within the last RECEIVE_QUIET_MS. One just
 * started counts before it grows, even before its first reading is recorded: its snapshot begins
 * within a pass or two, and another add meanwhile would start beside it unmeasured. One that answers
 * has its snapshot in and is applying, and one whose data dir stays still takes nothing from the
 * leader's uplink.
 */
function receivers(view: ClusterView): Receiver[] {
  const found = view.learners.flatMap((learner): Receiver[] => {
    const machine = view.machineOf(learner);
    const bytes = machine?.infra?.memberRunning === true ? machine.infra.memberDataBytes : undefined;
    if (!machine || learner.name === '' || bytes === undefined || memberAnswers(learner)) return [];
    const progress = machine.record.learnerProgress;
    const receive = progress?.receive ?? { from: { bytes, at: view.now } };
    const lastSeen = Math.max(progress?.at ?? view.now, receive.from.at);
    if (view.now - lastSeen > RECEIVE_QUIET_MS) return [];
    return [{ name: machine.record.name, receive, since: receive.since ?? receive.from.at }];
  });
  return found.sort((a, b) => a.since - b.since || a.name.localeCompare(b.name));
}

function megabytes(bytesPerSecond: number): string {
  return `${(bytesPerSecond / 1e6).toFixed(1)} MB/s`;
}

/**
 * Whether another catch-up may start now, with `maxLearners: auto` (a number is followed as set). A
 * learner added while others receive shares the leader's uplink with them when that uplink is the
 * limit; then it only makes the first one later. So the oldest learner receiving is watched: alone,
 * its rate is measured first, then one more catch-up may start (the probe); once others receive
 * beside it, the next waits until its rate since the newest began is measured, and is held while that
 * rate is below SHARED_UPLINK_SHARE of its peak. A learner limited by its own side keeps its rate, and
 * the catch-ups go on overlapping up to the learner limit. Learners not receiving (still booting, or
 * their snapshot in) hold nothing, and nothing is paced while the leader's database is small.
 */
export function catchUpBudget(view: ClusterView): Wait[] {
  // With the learner slots taken (one below etcd 3.6), the preflight holds the add already.
  if (!view.spec.paceCatchUps || view.learners.length >= view.learnerLimit) return [];
  const snapshotAtMost = largestVoterDb(view);
  if (snapshotAtMost !== undefined && snapshotAtMost <= PACED_ABOVE_DB_BYTES) return [];
  const [oldest, ...others] = receivers(view);
  if (!oldest) return [];
  const latest = oldest.receive.latest;
  const newest = others.at(-1);
  if (latest === undefined || (newest !== undefined && latest.from < newest.since)) {
    const since = newest === undefined ? 'alone' : `since ${newest.name} began receiving`;
    return [{ code: 'LeaderUplinkMeasuring', message: `learner ${oldest.name} receives its snapshot; its rate ${since} is not measured yet` }];
  }
  if (newest === undefined) return [];
  const peak = oldest.receive.peak ?? latest.bytesPerSecond;
  if (latest.bytesPerSecond >= SHARED_UPLINK_SHARE * peak) return [];
  const sent = [oldest, ...others].reduce((sum, r) => sum + (r.receive.latest?.bytesPerSecond ?? 0), 0);
  const share = Math.round((latest.bytesPerSecond / peak) * 100);
  return [
    {
      code: 'LeaderUplinkShared',
      message: `learner ${oldest.name} receives ${megabytes(latest.bytesPerSecond)}, ${String(share)}% of its peak ${megabytes(peak)}, while the leader sends ${megabytes(sent)} to ${String(others.length + 1)} learners: the leader's uplink is shared`,
    },
  ];
}

import type { EventRecord, MachinePhase } from '../domain/machine.ts';
import { MEMBERSHIP_ACTIONS } from '../bench/membership.ts';

/**
 * The timeline model behind `fastplane report`: a row per machine with a bar per phase from its
 * record's phaseTimes, a marker for every membership change from the event log, and machines already
 * removed rebuilt from their events. Pure; rendering is timeline-svg.ts.
 */

/** What a bar shows. Phases that read the same on a timeline share a category (Pending+Provisioning). */
export type Category = 'provisioning' | 'gate' | 'starting' | 'learner' | 'voter' | 'deleting' | 'failed' | 'history';

const CATEGORY_OF: Record<MachinePhase, Category> = {
  Pending: 'provisioning',
  Provisioning: 'provisioning',
  Provisioned: 'gate',
  Initializing: 'starting',
  Joining: 'starting',
  Learner: 'learner',
  Voter: 'voter',
  Deleting: 'deleting',
  Failed: 'failed',
};

export interface Segment {
  category: Category;
  start: number;
  end: number;
  /** Still in this phase when the timeline ends. */
  open: boolean;
}

export interface Marker {
  action: string;
  at: number;
  endedAt: number;
  succeeded: boolean;
  machine: string | undefined;
  message: string;
}

/**
 * A Kubernetes component's bar under its machine's member bar: kube-apiserver from its start to its
 * first `/readyz` ok (`apiserver`), then ready (`apiserver-ready`); controller-manager and scheduler
 * from their start to both healthy (`controllers`).
 */
export type ComponentBarKind = 'apiserver' | 'apiserver-ready' | 'controllers';

export interface ComponentBar {
  kind: ComponentBarKind;
  start: number;
  end: number;
  /** Not seen ready when the timeline ends. */
  open: boolean;
}

export interface Row {
  name: string;
  /** With the Kubernetes control plane: its components' bars (bench runs). */
  components?: ComponentBar[];
  /** Known only from the event log: the machine's record is gone (scaled down, replaced). */
  removed: boolean;
  segments: Segment[];
  markers: Marker[];
}

export interface Timeline {
  start: number;
  end: number;
  rows: Row[];
  /** Every membership change, succeeded or refused, for the cluster-wide row. */
  membership: Marker[];
}

/** The part of a machine record a timeline needs; bench results carry the same shape. */
export interface TimelineMachine {
  name: string;
  phaseTimes: Partial<Record<MachinePhase, number>>;
}

export type TimelineEvent = Pick<EventRecord, 'at' | 'action' | 'machine' | 'message'> & Partial<Pick<EventRecord, 'endedAt' | 'outcome'>>;

function toMarker(event: TimelineEvent): Marker {
  return { action: event.action ?? '', at: event.at, endedAt: event.endedAt ?? event.at, succeeded: event.outcome !== 'Failed', machine: event.machine, message: event.message };
}

/**
 * Bars from a record's phaseTimes: each phase lasts until the next one; the current one until `end`.
 * The gate ends when the machine's own membership change starts (its InitCluster or AddLearner):
 * phases are recorded when observed, and an init member is often first seen already a voter, so
 * without the event its start-up would be drawn as waiting.
 */
function segmentsOfRecord(machine: TimelineMachine, end: number, admittedAt: number | undefined): Segment[] {
  const phases = (Object.entries(machine.phaseTimes) as [MachinePhase, number][]).sort((a, b) => a[1] - b[1]);
  const segments: Segment[] = [];
  phases.forEach(([phase, at], i) => {
    const next = phases[i + 1];
    const category = CATEGORY_OF[phase];
    const stop = next ? next[1] : end;
    const last = segments.at(-1);
    if (last && last.category === category) {
      last.end = stop;
      last.open = next === undefined;
    } else {
      segments.push({ category, start: at, end: stop, open: next === undefined });
    }
  });
  const gate = segments.find((s) => s.category === 'gate');
  if (gate && admittedAt !== undefined && admittedAt >= gate.start && admittedAt < gate.end) {
    const next = segments[segments.indexOf(gate) + 1];
    if (next?.category === 'starting') next.start = admittedAt;
    else segments.splice(segments.indexOf(gate) + 1, 0, { category: 'starting', start: admittedAt, end: gate.end, open: gate.open });
    gate.end = admittedAt;
    gate.open = false;
  }
  return segments.filter((s) => s.end > s.start || s.open);
}

/**
 * A machine whose record is gone (scaled down, replaced) still has its events: creation, its join or
 * init, promotion, removal and deletion. Those bound its learner, voter and deleting bars; provisioning
 * and the gate cannot be told apart any more, so they share one neutral bar.
 */
function segmentsOfRemoved(events: TimelineEvent[]): Segment[] {
  const done = events.filter((e) => e.outcome !== 'Failed').sort((a, b) => a.at - b.at);
  const first = (action: string): TimelineEvent | undefined => done.find((e) => e.action === action);
  const endOf = (e: TimelineEvent): number => e.endedAt ?? e.at;
  const created = first('CreateMachine') ?? done[0];
  if (!created) return [];
  const init = first('InitCluster');
  const add = first('AddLearner');
  const promote = first('PromoteLearner');
  const joinedAt = init?.at ?? add?.at;
  const voterAt = init ? endOf(init) : promote ? endOf(promote) : undefined;
  const leaving = first('RequestMachineDeletion') ?? first('MarkMachineFailed') ?? first('RemoveMember') ?? first('DeleteMachine');
  const lastDeletion = done.filter((e) => e.action === 'DeleteMachine').at(-1);
  const gone = endOf(lastDeletion ?? done.at(-1) ?? created);
  const segments: Segment[] = [];
  const push = (category: Category, start: number | undefined, end: number | undefined): void => {
    if (start !== undefined && end !== undefined && end > start) segments.push({ category, start, end, open: false });
  };
  push('history', created.at, joinedAt ?? leaving?.at ?? gone);
  push(init ? 'starting' : 'learner', joinedAt, voterAt ?? leaving?.at);
  push('voter', voterAt, leaving?.at ?? gone);
  push('deleting', leaving?.at, gone);
  return segments;
}

/** Rows for the machines on record (by ordinal) and, after them, machines known only from events. */
export function buildTimeline(machines: TimelineMachine[], events: TimelineEvent[], options: { end?: number } = {}): Timeline {
  const membershipEvents = events.filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action));
  const points = [
    ...machines.flatMap((m) => Object.values(m.phaseTimes)),
    ...events.flatMap((e) => [e.at, e.endedAt ?? e.at]),
  ];
  const sorted = [...points].sort((a, b) => a - b);
  const start = sorted[0] ?? 0;
  const latest = sorted.at(-1) ?? 1;
  // A short tail after the last change, so bars still open visibly continue past it; sized on the
  // time that will be drawn to scale (idle gaps are squeezed), not on the whole span.
  const active = sorted.reduce((sum, t, i) => sum + Math.min(IDLE_GAP_MS, t - (sorted[i - 1] ?? t)), 0);
  const end = options.end ?? latest + Math.max(1000, active * 0.04);
  const markersOf = (name: string): Marker[] => membershipEvents.filter((e) => e.machine === name).map(toMarker);
  const admittedAt = (name: string): number | undefined =>
    membershipEvents.find((e) => e.machine === name && e.outcome !== 'Failed' && (e.action === 'InitCluster' || e.action === 'AddLearner'))?.at;
  const rows: Row[] = machines.map((m) => ({ name: m.name, removed: false, segments: segmentsOfRecord(m, end, admittedAt(m.name)), markers: markersOf(m.name) }));
  const onRecord = new Set(machines.map((m) => m.name));
  const removedNames = [...new Set(events.flatMap((e) => (e.machine !== undefined && !onRecord.has(e.machine) ? [e.machine] : [])))];
  for (const name of removedNames) {
    rows.push({ name, removed: true, segments: segmentsOfRemoved(events.filter((e) => e.machine === name)), markers: markersOf(name) });
  }
  // In order of appearance, so a replaced machine sits where it lived, not after every live one.
  const firstSeen = (row: Row): number => row.segments[0]?.start ?? row.markers[0]?.at ?? end;
  rows.sort((a, b) => firstSeen(a) - firstSeen(b) || a.name.localeCompare(b.name, 'en', { numeric: true }));
  return { start, end, rows, membership: membershipEvents.map(toMarker) };
}

/** Stretches with nothing changing longer than this are squeezed on the time axis. */
export const IDLE_GAP_MS = 30_000;

import { InvalidInputError } from '../../api/errors.ts';
import { controlPlaneRecord } from '../../app/records.ts';
import type { EventRecord } from '../../domain/machine.ts';
import { systemClock } from '../../ports/clock.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';

/** One event as `events -o json` prints it: the contract scripts and checks read. */
export interface EventEntry {
  time: string;
  machine: string | null;
  action: string | null;
  reason: string;
  result: 'ok' | 'refused' | 'failed';
  startedAt: string;
  endedAt: string | null;
  message: string;
  error?: string;
}

const iso = (ms: number): string => new Date(ms).toISOString();

export function eventEntry(event: EventRecord): EventEntry {
  const result = event.outcome === 'Refused' ? 'refused' : event.outcome === 'Failed' || (event.outcome === undefined && event.type === 'Warning') ? 'failed' : 'ok';
  return {
    time: iso(event.endedAt ?? event.at),
    machine: event.machine ?? null,
    action: event.action ?? null,
    reason: event.reason,
    result,
    startedAt: iso(event.at),
    endedAt: event.endedAt === undefined ? null : iso(event.endedAt),
    message: event.message,
    ...(result === 'ok' ? {} : { error: event.message }),
  };
}

function line(entry: EventEntry): string {
  return [entry.time, entry.result.padEnd(7), (entry.action ?? '-').padEnd(16), (entry.machine ?? '-').padEnd(14), entry.message].join(' ');
}

const WATCH_POLL_MS = 300;

/** `fastplane events NAME`: what was done, when, and how it ended; --watch follows new ones. */
export async function eventsCommand(ctx: CliContext, name: string, flags: { watch?: boolean; output: string }): Promise<number> {
  if (flags.output !== 'table' && flags.output !== 'json') throw new InvalidInputError([`-o: must be table or json, got ${flags.output}`]);
  await controlPlaneRecord(ctx, name);
  const json = flags.output === 'json';
  const events = await ctx.store.listEvents(name);
  if (flags.watch !== true) {
    const entries = events.map(eventEntry);
    process.stdout.write(json ? `${JSON.stringify(entries, null, 2)}\n` : entries.map((e) => `${line(e)}\n`).join(''));
    return EXIT.converged;
  }
  // Watching: one line (or one JSON object) per event as it is recorded, until interrupted.
  const print = (event: EventRecord): void => {
    const entry = eventEntry(event);
    process.stdout.write(`${json ? JSON.stringify(entry) : line(entry)}\n`);
  };
  let lastSeq = 0;
  for (const event of events) {
    print(event);
    lastSeq = event.seq ?? lastSeq;
  }
  const watch = { interrupted: false };
  const stop = (): void => {
    watch.interrupted = true;
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  while (!watch.interrupted) {
    await systemClock.sleep(WATCH_POLL_MS);
    if (!(await ctx.store.getControlPlane(name))) break;
    for (const event of await ctx.store.listEvents(name, lastSeq)) {
      print(event);
      lastSeq = event.seq ?? lastSeq;
    }
  }
  return EXIT.converged;
}

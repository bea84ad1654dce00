import { Listr, ListrLogger, ProcessOutput, type ListrDefaultRendererLogLevels, type ListrTaskWrapper, type DefaultRenderer, type SimpleRenderer } from 'listr2';
import type { ReconcileProgress } from '../app/reconcile.ts';
import type { EventRecord, MachineRecord } from '../domain/machine.ts';
import type { Decision, Observed } from '../planner/types.ts';

export interface PassView {
  observed: Observed;
  decision: Decision;
  changed: MachineRecord[];
  now: number;
}

const clockTime = (ms: number): string => new Date(ms).toISOString().slice(11, 23);

function summary(decision: Decision): string {
  const counts = new Map<string, number>();
  for (const phase of Object.values(decision.phases)) counts.set(phase, (counts.get(phase) ?? 0) + 1);
  return [...counts].map(([phase, n]) => `${String(n)} ${phase}`).join(', ') || 'no machines yet';
}

/** Plain timestamped lines: for logs, CI and anything that is not a terminal. */
export class PlainProgress implements ReconcileProgress {
  private lastWaits = '';
  private lastRefusal = '';

  constructor(private readonly out: NodeJS.WritableStream = process.stderr) {}

  private line(at: number, text: string): void {
    this.out.write(`${clockTime(at)} ${text}\n`);
  }

  onPass({ decision, changed, now }: PassView): void {
    for (const machine of changed) {
      const at = machine.phaseTimes[machine.phase];
      if (at === now) this.line(now, `machine ${machine.name} is ${machine.phase}`);
    }
    const waits = decision.waits.map((w) => w.message).join('; ');
    if (waits !== this.lastWaits && waits !== '') this.line(now, `waiting: ${waits}`);
    this.lastWaits = waits;
  }

  onEvent(event: EventRecord): void {
    if (event.action === undefined || event.action === 'CreateMachine') return;
    // etcd refuses the same change many times in a row (the 5 s rule): say it once.
    const refusal = event.outcome === 'Succeeded' ? '' : event.message;
    if (refusal !== '' && refusal === this.lastRefusal) return;
    this.lastRefusal = refusal;
    const took = event.endedAt === undefined ? '' : ` (${String(event.endedAt - event.at)} ms)`;
    const verb = event.outcome === 'Refused' ? 'refused' : event.outcome === 'Failed' ? 'failed' : 'done';
    this.line(event.endedAt ?? event.at, `${verb}: ${event.message}${took}`);
  }

  note(text: string): void {
    this.line(Date.now(), text);
  }

  async run<T>(title: string, work: () => Promise<T>): Promise<T> {
    this.out.write(`${title}\n`);
    return work();
  }
}

type Task = ListrTaskWrapper<unknown, typeof DefaultRenderer, typeof SimpleRenderer>;

/** A live view on a terminal: one line per machine with its phase, the planner's waits below. */
export class TerminalProgress implements ReconcileProgress {
  private task: Task | undefined;
  private lastEvent = '';

  onPass({ decision, observed }: PassView): void {
    if (!this.task) return;
    const lines = observed.machines.map((m) => `${m.record.name.padEnd(16)} ${decision.phases[m.record.name] ?? m.record.phase}`);
    const waits = decision.waits.slice(0, 4).map((w) => `waiting: ${w.message}`);
    this.task.title = `Reconciling: ${summary(decision)}`;
    this.task.output = [...lines, ...waits, this.lastEvent].filter(Boolean).join('\n');
  }

  onEvent(event: EventRecord): void {
    if (event.action !== undefined && event.action !== 'CreateMachine' && event.outcome === 'Succeeded') this.lastEvent = `last change: ${event.message}`;
  }

  note(text: string): void {
    if (this.task) this.task.output = text;
  }

  async run<T>(title: string, work: () => Promise<T>): Promise<T> {
    let result: T | undefined;
    const list = new Listr(
      [
        {
          title,
          task: async (_ctx, task): Promise<void> => {
            this.task = task;
            result = await work();
          },
          rendererOptions: { outputBar: Infinity, persistentOutput: false },
        },
      ],
      {
        exitOnError: true,
        rendererOptions: { collapseErrors: false, logger: new ListrLogger<ListrDefaultRendererLogLevels>({ processOutput: new ProcessOutput(process.stderr, process.stderr) }) },
      },
    );
    await list.run();
    return result as T;
  }
}

/** Shows a long reconcile as it goes, on stderr so stdout carries only the result. */
export function progressFor(stream: NodeJS.WriteStream = process.stderr): ReconcileProgress {
  return stream.isTTY ? new TerminalProgress() : new PlainProgress(stream);
}

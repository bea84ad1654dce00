import { InvalidInputError } from '../api/errors.ts';
import { maintain } from '../dr/maintain.ts';
import { systemClock } from '../ports/clock.ts';
import { clientEndpoints, underLeaseWithClients } from './backup-commands.ts';
import { storedManifest } from './commands.ts';
import { EXIT } from './exit-codes.ts';
import type { CliContext } from './context.ts';

export interface MaintainFlags {
  retain: string;
  threshold: string;
  output: string;
}

function parseFlags(flags: MaintainFlags): { retainRevisions: number; fragmentationThreshold: number } {
  const retainRevisions = Number(flags.retain);
  if (!/^\d+$/.test(flags.retain)) throw new InvalidInputError([`--retain: must be a whole number of revisions, got ${flags.retain}`]);
  const fragmentationThreshold = Number(flags.threshold);
  if (!/^(0(\.\d+)?|1(\.0+)?)$/.test(flags.threshold)) throw new InvalidInputError([`--threshold: must be a share between 0 and 1 such as 0.3, got ${flags.threshold}`]);
  if (flags.output !== 'table' && flags.output !== 'json') throw new InvalidInputError([`-o: must be table or json, got ${flags.output}`]);
  return { retainRevisions, fragmentationThreshold };
}

/** `maintain NAME`: compaction, defragmentation and NOSPACE recovery, under the cluster's lease. */
export async function maintainCommand(ctx: CliContext, name: string, flags: MaintainFlags): Promise<number> {
  const options = parseFlags(flags);
  const manifest = await storedManifest(ctx, name);
  const endpoints = await clientEndpoints(ctx, name);
  const report = await underLeaseWithClients(ctx, manifest, 'maintenance', ({ admin, maintenance }, writer) =>
    maintain(
      {
        admin,
        maintenance,
        endpoints,
        writer,
        clock: systemClock,
        healthTimeoutMs: 60_000,
        onNote: (text) => {
          ctx.log.info({ cluster: name }, text);
          if (flags.output === 'table') process.stdout.write(`${text}\n`);
        },
      },
      options,
    ),
  );
  if (report === undefined) return EXIT.blocked;
  if (flags.output === 'json') process.stdout.write(`${JSON.stringify(report, null, 2)}\n`);
  return EXIT.converged;
}

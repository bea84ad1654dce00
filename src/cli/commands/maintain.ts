import { InvalidInputError } from '../../api/errors.ts';
import type { MaintainOptions } from '../../ports/care.ts';
import { maintain } from '../../app/maintenance.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { tableOrJson } from '../render.ts';

export interface MaintainFlags {
  retain: string;
  threshold: string;
  output: string;
}

function parseFlags(flags: MaintainFlags): MaintainOptions {
  const retainRevisions = Number(flags.retain);
  if (!/^\d+$/.test(flags.retain)) throw new InvalidInputError([`--retain: must be a whole number of revisions, got ${flags.retain}`]);
  const fragmentationThreshold = Number(flags.threshold);
  if (!/^(0(\.\d+)?|1(\.0+)?)$/.test(flags.threshold)) throw new InvalidInputError([`--threshold: must be a share between 0 and 1 such as 0.3, got ${flags.threshold}`]);
  tableOrJson(flags.output);
  return { retainRevisions, fragmentationThreshold };
}

/** `maintain NAME`: compaction, defragmentation and NOSPACE recovery, under the cluster's lease. */
export async function maintainCommand(ctx: CliContext, name: string, flags: MaintainFlags): Promise<number> {
  const options = parseFlags(flags);
  const report = await maintain(ctx, name, options, (text) => {
    if (flags.output === 'table') process.stdout.write(`${text}\n`);
  });
  if (!report.done) {
    process.stderr.write(`error: ${report.message}\n`);
    return EXIT.blocked;
  }
  if (flags.output === 'json') process.stdout.write(`${JSON.stringify(report.value, null, 2)}\n`);
  return EXIT.converged;
}

import { recoveryHint, statusOf, statusOfAll } from '../../app/status.ts';
import type { ControlPlaneStatusDocument } from '../../reconciler/status.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { explain, parseOutput, render } from '../render.ts';

export async function statusCommand(ctx: CliContext, name: string | undefined, flags: { output: string; explain?: boolean }): Promise<number> {
  const format = parseOutput(flags.output);
  // A cluster that lost its majority for good: explain points to recover and to the latest backup.
  const explained = async (doc: ControlPlaneStatusDocument): Promise<string> => [explain(doc), ...(await recoveryHint(ctx, doc))].join('\n');
  if (name !== undefined) {
    const doc = await statusOf(ctx, name);
    process.stdout.write(`${flags.explain === true ? await explained(doc) : render(doc, format)}\n`);
    return EXIT.converged;
  }
  const docs = await statusOfAll(ctx);
  process.stdout.write(`${flags.explain === true ? (await Promise.all(docs.map(explained))).join('\n') : render(docs, format)}\n`);
  return EXIT.converged;
}

import { InvalidInputError } from '../../api/errors.ts';
import { rotateSecrets } from '../../app/secrets.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { noteOnStderr, tableOrJson } from '../render.ts';
import { renderTable } from '../table.ts';

/**
 * `secrets rotate`: seals every control plane's documents in the store again with the key file's
 * first key; progress on stderr, one line per control plane on stdout. Exit 3 when a cluster's lease
 * stayed elsewhere: its documents keep their key, so the old key must stay in the files.
 */
export async function secretsCommand(ctx: CliContext, action: string, flags: { output: string }): Promise<number> {
  const format = tableOrJson(flags.output);
  if (action !== 'rotate') throw new InvalidInputError([`secrets: unknown action ${action}; use secrets rotate`]);
  const rotations = await rotateSecrets(ctx, noteOnStderr);
  const rows = rotations.map(({ name, work }) =>
    work.done ? { name, done: true, documents: work.value.documents, resealed: work.value.resealed } : { name, done: false, reason: work.reason, message: work.message },
  );
  if (format === 'json') process.stdout.write(`${JSON.stringify(rows, null, 2)}\n`);
  else process.stdout.write(`${renderTable([['NAME', 'RESEALED', 'DOCUMENTS', 'RESULT'], ...rows.map((r) => [r.name, String(r.resealed ?? '-'), String(r.documents ?? '-'), r.done ? 'done' : (r.message ?? '')])])}\n`);
  return rotations.every((r) => r.work.done) ? EXIT.converged : EXIT.blocked;
}

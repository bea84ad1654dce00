import { InvalidInputError } from '../../api/errors.ts';
import { certificatesOf, renewCertificates } from '../../app/certificates.ts';
import type { CertificateInfo } from '../../ports/care.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { noteOnStderr, tableOrJson } from '../render.ts';
import { renderTable } from '../table.ts';

function printCertificates(list: CertificateInfo[], format: 'table' | 'json'): void {
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
    return;
  }
  process.stdout.write(`${renderTable([['NOT AFTER', 'SUBJECT', 'FILE'], ...list.map((c) => [c.notAfter, c.subject, c.file])])}\n`);
}

/** `certs NAME` shows the certificates; `certs renew NAME` renews them (`--ca`: rotates the CA), then shows them. */
export async function certsCommand(ctx: CliContext, first: string, second: string | undefined, flags: { output: string; ca?: boolean }): Promise<number> {
  const format = tableOrJson(flags.output);
  if (second !== undefined && first !== 'renew') throw new InvalidInputError([`certs: unknown action ${first}; use certs NAME or certs renew NAME`]);
  const name = second ?? first;
  if (flags.ca === true && second === undefined) throw new InvalidInputError(['--ca: only with certs renew NAME']);
  if (second !== undefined) {
    const renewed = await renewCertificates(ctx, name, flags.ca === true, noteOnStderr);
    if (!renewed.done) {
      process.stderr.write(`error: ${renewed.message}\n`);
      return EXIT.blocked;
    }
  }
  printCertificates(await certificatesOf(ctx, name), format);
  return EXIT.converged;
}

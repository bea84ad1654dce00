import { InvalidInputError } from '../../api/errors.ts';
import type { CertificateInfo } from '../../ports/care.ts';
import { careFor } from '../care.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { underLeaseOrBlocked } from '../lease.ts';
import { tableOrJson } from '../render.ts';
import { storedManifest } from '../spec-flags.ts';
import { renderTable } from '../table.ts';

function printCertificates(list: CertificateInfo[], format: 'table' | 'json'): void {
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
    return;
  }
  process.stdout.write(`${renderTable([['NOT AFTER', 'SUBJECT', 'FILE'], ...list.map((c) => [c.notAfter, c.subject, c.file])])}\n`);
}

/** Renews (with `rotateCa`, rotates the CA) under the cluster's lease; exit 3 when the lease or a health gate stopped it. */
async function renew(ctx: CliContext, name: string, rotateCa: boolean): Promise<number> {
  const manifest = await storedManifest(ctx, name);
  if (manifest.spec.provider.insecure) throw new InvalidInputError([`control plane ${name} runs without TLS (spec.provider.insecure): it has no certificates to renew`]);
  const care = careFor(ctx, manifest);
  const onNote = (text: string): void => {
    process.stderr.write(`${text}\n`);
  };
  const renewed = await underLeaseOrBlocked(ctx, name, rotateCa ? 'CA rotation' : 'certificate renewal', (writer) =>
    rotateCa ? care.rotateCertificateAuthority(writer, onNote) : care.renewCertificates(writer, onNote),
  );
  return renewed === undefined ? EXIT.blocked : EXIT.converged;
}

/** `certs NAME` shows the certificates; `certs renew NAME` renews them, then shows them. */
export async function certsCommand(ctx: CliContext, first: string, second: string | undefined, flags: { output: string; ca?: boolean }): Promise<number> {
  const format = tableOrJson(flags.output);
  if (second !== undefined && first !== 'renew') throw new InvalidInputError([`certs: unknown action ${first}; use certs NAME or certs renew NAME`]);
  const name = second ?? first;
  if (flags.ca === true && second === undefined) throw new InvalidInputError(['--ca: only with certs renew NAME']);
  if (second !== undefined) {
    const code = await renew(ctx, name, flags.ca === true);
    if (code !== EXIT.converged) return code;
  }
  const manifest = await storedManifest(ctx, name);
  if (manifest.spec.provider.insecure) throw new InvalidInputError([`control plane ${name} runs without TLS (spec.provider.insecure): it has no certificates`]);
  printCertificates(await careFor(ctx, manifest).certificates(), format);
  return EXIT.converged;
}

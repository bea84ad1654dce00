import { InvalidInputError } from '../api/errors.ts';
import { describeCertificate, type CertificateInfo } from '../adapters/pki/local-pki.ts';
import { launchFor } from '../executor/execute.ts';
import type { ControlPlane } from '../api/control-plane.ts';
import { renewCertificates, rotateCertificateAuthority, type RenewDeps } from '../dr/renew-certificates.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { systemClock } from '../ports/clock.ts';
import { underLeaseWithClients, withClients } from './backup-commands.ts';
import { storedManifest } from './commands.ts';
import { EXIT } from './exit-codes.ts';
import type { CliContext } from './context.ts';
import { renderTable } from './table.ts';

const HEALTH_TIMEOUT_MS = 60_000;

async function certificates(ctx: CliContext, name: string): Promise<CertificateInfo[]> {
  const manifest = await storedManifest(ctx, name);
  if (manifest.spec.provider.insecure) throw new InvalidInputError([`control plane ${name} runs without TLS (spec.provider.insecure): it has no certificates`]);
  return Promise.all((await ctx.provider(manifest).certificateFiles(name)).map(describeCertificate));
}

function printCertificates(list: CertificateInfo[], format: string): void {
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(list, null, 2)}\n`);
    return;
  }
  process.stdout.write(`${renderTable([['NOT AFTER', 'SUBJECT', 'FILE'], ...list.map((c) => [c.notAfter, c.subject, c.file])])}\n`);
}

/**
 * Renews (or with `rotateCa` rotates the CA and renews) holding the cluster's lease through `writer`:
 * `certs renew` and the reconcile loop's RenewCertificates action. Returns the machines renewed.
 */
export async function renewUnderLease(ctx: CliContext, manifest: ControlPlane, writer: FencedWriter, options: { rotateCa: boolean; onNote?: (text: string) => void }): Promise<string[]> {
  const name = manifest.metadata.name;
  const cp = await ctx.store.getControlPlane(name);
  if (!cp) throw new InvalidInputError([`no control plane named ${name} in ${ctx.storeLocation}`]);
  const deps: RenewDeps = {
    cluster: name,
    // Fresh clients per rolling restart: a CA rotation changes the trusted CAs and the client certificate.
    withAdmin: (use) => withClients(ctx, manifest, ({ admin }) => use(admin)),
    provider: ctx.provider(manifest),
    machines: await ctx.store.listMachines(name),
    // On a data dir etcd ignores the bootstrap flags: the member comes back as itself.
    launchFor: (machine) => launchFor(cp, machine, `${machine.name}=${machine.peerURL ?? ''}`, 'existing'),
    writer,
    clock: systemClock,
    healthTimeoutMs: HEALTH_TIMEOUT_MS,
    onNote: (text) => {
      ctx.log.info({ cluster: name }, text);
      options.onNote?.(text);
    },
  };
  return options.rotateCa ? rotateCertificateAuthority(deps) : renewCertificates(deps);
}

/** Renews under the cluster's lease; exit 3 when the lease or a health gate stopped it. */
async function renew(ctx: CliContext, name: string, rotateCa: boolean): Promise<number> {
  const manifest = await storedManifest(ctx, name);
  if (manifest.spec.provider.insecure) throw new InvalidInputError([`control plane ${name} runs without TLS (spec.provider.insecure): it has no certificates to renew`]);
  const renewed = await underLeaseWithClients(ctx, manifest, rotateCa ? 'CA rotation' : 'certificate renewal', (_clients, writer) =>
    renewUnderLease(ctx, manifest, writer, { rotateCa, onNote: (text) => process.stderr.write(`${text}\n`) }),
  );
  return renewed === undefined ? EXIT.blocked : EXIT.converged;
}

/** `certs NAME` shows the certificates; `certs renew NAME` renews them, then shows them. */
export async function certsCommand(ctx: CliContext, first: string, second: string | undefined, flags: { output: string; ca?: boolean }): Promise<number> {
  if (flags.output !== 'table' && flags.output !== 'json') throw new InvalidInputError([`-o: must be table or json, got ${flags.output}`]);
  if (second !== undefined && first !== 'renew') throw new InvalidInputError([`certs: unknown action ${first}; use certs NAME or certs renew NAME`]);
  const name = second ?? first;
  if (flags.ca === true && second === undefined) throw new InvalidInputError(['--ca: only with certs renew NAME']);
  if (second !== undefined) {
    const code = await renew(ctx, name, flags.ca === true);
    if (code !== EXIT.converged) return code;
  }
  printCertificates(await certificates(ctx, name), flags.output);
  return EXIT.converged;
}

import { InvalidInputError } from '../../api/errors.ts';
import { clientAccess, type ClientAccess } from '../../app/client-access.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';

/**
 * `fastplane endpoints NAME`: how to reach a control plane as a client (its voters' client URLs and
 * fastplane's client certificate), printed ready to paste: as the global flags that make it the record
 * store (`--store etcd ...`, the default), as environment variables (`-o env`), or as JSON. This is how
 * a management control plane brought up with fastplane becomes the store of every later command.
 */

/** Single-quoted for a POSIX shell when it holds anything but safe characters. */
function quoted(text: string): string {
  return /^[\w@%+=:,./-]+$/.test(text) ? text : `'${text.replaceAll("'", `'\\''`)}'`;
}

export function renderAccess(access: ClientAccess, format: string): string {
  const pairs: [flag: string, env: string, value: string | undefined][] = [
    ['--etcd-endpoints', 'FASTPLANE_ETCD_ENDPOINTS', access.endpoints.join(',')],
    ['--etcd-cacert', 'FASTPLANE_ETCD_CACERT', access.cacert],
    ['--etcd-cert', 'FASTPLANE_ETCD_CERT', access.cert],
    ['--etcd-key', 'FASTPLANE_ETCD_KEY', access.key],
  ];
  const given = pairs.flatMap(([flag, env, value]) => (value === undefined ? [] : [{ flag, env, value }]));
  // A cluster without TLS is a store only with the flag that says so (store-selection.ts).
  const insecure = access.cert === undefined;
  switch (format) {
    case 'flags':
      return ['--store etcd', ...given.map(({ flag, value }) => `${flag} ${quoted(value)}`), ...(insecure ? ['--insecure-store'] : [])].join(' ');
    case 'env':
      return ['export FASTPLANE_STORE=etcd', ...given.map(({ env, value }) => `export ${env}=${quoted(value)}`), ...(insecure ? ['export FASTPLANE_INSECURE_STORE=1'] : [])].join('\n');
    case 'json':
      return JSON.stringify(access, null, 2);
    default:
      throw new InvalidInputError([`-o: must be flags, env or json, got ${format}`]);
  }
}

export async function endpointsCommand(ctx: CliContext, name: string, flags: { output: string }): Promise<number> {
  // Checked before anything is read: a bad -o is an input error whatever the store holds.
  renderAccess({ endpoints: [] }, flags.output);
  const access = await clientAccess(ctx, name);
  if (access === undefined) {
    process.stderr.write(`error: control plane ${name} has no voting member yet; run fastplane up --name ${name} first\n`);
    return EXIT.blocked;
  }
  process.stdout.write(`${renderAccess(access, flags.output)}\n`);
  return EXIT.converged;
}

import { InvalidInputError } from '../../api/errors.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';

/**
 * `fastplane endpoints NAME`: how to reach a control plane as a client (its voters' client URLs and
 * fastplane's client certificate), printed ready to paste: as the global flags that make it the record
 * store (`--store etcd ...`, the default), as environment variables (`-o env`), or as JSON. This is how
 * a management control plane brought up with fastplane becomes the store of every later command.
 */

export interface ClientAccess {
  endpoints: string[];
  cacert?: string;
  cert?: string;
  key?: string;
}

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
  switch (format) {
    case 'flags':
      return ['--store etcd', ...given.map(({ flag, value }) => `${flag} ${quoted(value)}`)].join(' ');
    case 'env':
      return ['export FASTPLANE_STORE=etcd', ...given.map(({ env, value }) => `export ${env}=${quoted(value)}`)].join('\n');
    case 'json':
      return JSON.stringify(access, null, 2);
    default:
      throw new InvalidInputError([`-o: must be flags, env or json, got ${format}`]);
  }
}

export async function endpointsCommand(ctx: CliContext, name: string, flags: { output: string }): Promise<number> {
  // Checked before anything is read: a bad -o is an input error whatever the store holds.
  renderAccess({ endpoints: [] }, flags.output);
  const cp = await ctx.store.getControlPlane(name);
  if (!cp) throw new InvalidInputError([`no control plane named ${name} in ${ctx.storeLocation}`]);
  const voters = (await ctx.store.listMachines(name)).filter((m) => m.phase === 'Voter' && m.clientURL !== undefined);
  if (voters.length === 0) {
    process.stderr.write(`error: control plane ${name} has no voting member yet; run fastplane up --name ${name} first\n`);
    return EXIT.blocked;
  }
  const tls = ctx.provider(cp.manifest).clientTls(name);
  const access: ClientAccess = {
    endpoints: voters.flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL])),
    ...(tls === undefined ? {} : { cacert: tls.caFile, cert: tls.certFile, key: tls.keyFile }),
  };
  process.stdout.write(`${renderAccess(access, flags.output)}\n`);
  return EXIT.converged;
}

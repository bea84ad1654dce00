import { z } from 'zod';
import { parseDuration } from './duration.ts';

/**
 * The ssh provider's fields of `spec.provider` (`name: ssh`): machines are hosts you own, reached over
 * SSH. Either an inventory (`hosts`) or provisioning hooks (`provision`) that create hosts on demand.
 */

const OCTET = '(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const IPV4 = new RegExp(`^${OCTET}(\\.${OCTET}){3}$`);
const LABEL = '[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?';
const HOST_NAME = new RegExp(`^(?=.{1,253}$)${LABEL}(\\.${LABEL})*$`, 'i');

/**
 * Where fastplane connects, and what goes into the member's URLs and certificate: an IPv4 literal or a
 * DNS host name, nothing else (no option for ssh, no URL, no shell word). All digits and dots is an
 * IPv4 literal or nothing, never a name.
 */
export const SshAddressSchema = z.string().refine((text) => IPV4.test(text) || (HOST_NAME.test(text) && !/^[\d.]+$/.test(text)), {
  error: 'must be an IPv4 address or a host name',
});

export const SshHostSchema = z
  .object({
    address: SshAddressSchema,
    port: z.number().int().min(1).max(65535).default(22),
    user: z.string().min(1).default('root'),
    failureDomain: z.string().optional(),
  })
  .strict();

export type SshHost = z.infer<typeof SshHostSchema>;

export const ProvisionHooksSchema = z
  .object({
    create: z.string().min(1, { error: 'must be a command' }),
    delete: z.string().min(1, { error: 'must be a command' }).optional(),
    timeout: z
      .string()
      .refine((text) => parseDuration(text) !== undefined, { error: 'timeout must be a duration such as 30s or 5m' })
      .default('10m'),
  })
  .strict();

/** Added to the provider's object schema; all optional, checked together by checkSshProvider. */
export const sshProviderFields = {
  hosts: z.array(SshHostSchema).optional(),
  identityFile: z.string().min(1).optional(),
  knownHostsFile: z.string().min(1).optional(),
  /** etcd binary per version on fastplane's side (default: the ones installed here). */
  etcdBinaries: z.record(z.string(), z.string().min(1)).optional(),
  baseDir: z.string().regex(/^\/[^\0]*[^/]$/, { error: 'must be an absolute directory path' }).optional(),
  provision: ProvisionHooksSchema.optional(),
};

interface SshProviderView {
  name: string;
  hosts?: SshHost[] | undefined;
  identityFile?: string | undefined;
  knownHostsFile?: string | undefined;
  provision?: unknown;
}

/** Cross-field rules: what each provider needs, and enough hosts for the replicas plus a rollout's surge. */
export function checkSshProvider(provider: SshProviderView, replicas: number, maxSurge: number, issue: (path: (string | number)[], message: string) => void): void {
  const sshOnly = ['hosts', 'identityFile', 'knownHostsFile', 'provision'] as const;
  if (provider.name !== 'ssh') {
    for (const field of sshOnly) if (provider[field] !== undefined) issue(['provider', field], `only for provider ssh (this is ${provider.name})`);
    return;
  }
  if (provider.identityFile === undefined) issue(['provider', 'identityFile'], 'is required for provider ssh (the private key fastplane logs in with)');
  if (provider.knownHostsFile === undefined) issue(['provider', 'knownHostsFile'], 'is required for provider ssh (host keys are always verified)');
  const hosts = provider.hosts ?? [];
  if (provider.provision === undefined) {
    if (hosts.length < replicas + maxSurge) {
      issue(['provider', 'hosts'], `needs at least replicas + rollout.maxSurge = ${String(replicas + maxSurge)} hosts, got ${String(hosts.length)}`);
    }
  } else if (hosts.length > 0) {
    issue(['provider', 'hosts'], 'give either hosts or provision hooks, not both');
  }
  const seen = new Set<string>();
  hosts.forEach((host, i) => {
    const key = `${host.address}:${String(host.port)}`;
    if (seen.has(key)) issue(['provider', 'hosts', i, 'address'], `duplicate host ${key}`);
    seen.add(key);
  });
}

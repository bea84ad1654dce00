import { z } from 'zod';
import { parseDuration } from './duration.ts';

/**
 * The ssh provider's fields of `spec.provider` (`name: ssh`): machines are hosts you own, reached over
 * SSH. Either an inventory (`hosts`) or provisioning hooks (`provision`) that create hosts on demand.
 */

const OCTET = '(25[0-5]|2[0-4]\\d|1\\d\\d|[1-9]?\\d)';
const LABEL = '[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?';

/** The forms of an SSH address, for the CLI's check here and the CRD's CEL rule: no lookahead, as CEL's RE2 has none. */
export const SSH_ADDRESS_FORMS = {
  ipv4: `^${OCTET}(\\.${OCTET}){3}$`,
  /** Case-insensitive, at most hostNameMaxLength characters. */
  hostName: `^${LABEL}(\\.${LABEL})*$`,
  hostNameMaxLength: 253,
  /** All digits and dots is an IPv4 literal or nothing, never a name. */
  digitsAndDots: '^[\\d.]+$',
};
const IPV4 = new RegExp(SSH_ADDRESS_FORMS.ipv4);
const HOST_NAME = new RegExp(SSH_ADDRESS_FORMS.hostName, 'i');

/** The words of the ssh provider's rules, shared by the CLI and the CRD's CEL rules (src/api/crd-rules.ts). */
export const SSH_MESSAGES = {
  onlyForSsh: (provider: string) => `only for provider ssh (this is ${provider})`,
  identityFile: () => 'is required for provider ssh (the private key fastplane logs in with)',
  knownHostsFile: () => 'is required for provider ssh (host keys are always verified)',
  hostCount: (needed: string, got: string) => `needs at least replicas + rollout.maxSurge = ${needed} hosts, got ${got}`,
  hostsOrProvision: () => 'give either hosts or provision hooks, not both',
  endpointRequired: () => 'is required for a Kubernetes control plane on provider ssh: endpoint.host (a host of yours fastplane runs HAProxy on) or endpoint.loadBalancer (the address of your own load balancer, which fastplane only checks)',
  endpointOneOf: () => 'give either host or loadBalancer, not both',
  endpointNeedsKubernetes: () => 'only for a Kubernetes control plane (spec.kubernetes)',
  endpointHostIsMachineHost: (address: string) => `${address} is also one of spec.provider.hosts: HAProxy there and that machine's kube-apiserver would both bind port 6443; give the endpoint a host of its own`,
};

/**
 * Where fastplane connects, and what goes into the member's URLs and certificate: an IPv4 literal or a
 * DNS host name, nothing else (no option for ssh, no URL, no shell word). All digits and dots is an
 * IPv4 literal or nothing, never a name.
 */
export const SshAddressSchema = z
  .string()
  .max(SSH_ADDRESS_FORMS.hostNameMaxLength, { error: 'must be an IPv4 address or a host name', abort: true })
  .refine((text) => IPV4.test(text) || (HOST_NAME.test(text) && !new RegExp(SSH_ADDRESS_FORMS.digitsAndDots).test(text)), {
    error: 'must be an IPv4 address or a host name',
  })
  .describe('Where fastplane connects: an IPv4 address or a DNS host name.');

export const SshHostSchema = z
  .object({
    address: SshAddressSchema,
    port: z.number().int().min(1).max(65535).default(22).describe('The SSH port.'),
    user: z.string().min(1).default('root').describe('The user fastplane logs in as.'),
    failureDomain: z.string().optional().describe("The host's failure domain."),
  })
  .strict()
  .describe('A host of the inventory.');

export type SshHost = z.infer<typeof SshHostSchema>;

export const ProvisionHooksSchema = z
  .object({
    create: z.string().min(1, { error: 'must be a command' }).describe('The command that creates a host and prints its address.'),
    delete: z.string().min(1, { error: 'must be a command' }).optional().describe('The command that deletes a host.'),
    timeout: z
      .string()
      .max(32, { error: 'timeout must be a duration such as 30s or 5m', abort: true })
      .refine((text) => parseDuration(text) !== undefined, { error: 'timeout must be a duration such as 30s or 5m' })
      .default('10m')
      .describe('How long a hook may run.'),
  })
  .strict()
  .describe('Hooks that create hosts on demand, instead of an inventory.');

/**
 * A Kubernetes control plane's endpoint on provider ssh: a host of the user's that fastplane runs
 * HAProxy on (reached over SSH like the machines' hosts, never one of them), or the address of the
 * user's own load balancer, which fastplane never configures and only checks (`/readyz` through it).
 */
export const SshEndpointSchema = z
  .object({
    host: z
      .object({
        address: SshAddressSchema,
        port: z.number().int().min(1).max(65535).default(22).describe('The SSH port.'),
        user: z.string().min(1).default('root').describe('The user fastplane logs in as.'),
      })
      .strict()
      .optional()
      .describe('A host fastplane runs HAProxy on, in front of the apiservers (port 6443 of its address).'),
    loadBalancer: z
      .string()
      .max(SSH_ADDRESS_FORMS.hostNameMaxLength + 6, { error: 'must be an address such as 10.0.0.5:6443', abort: true })
      .regex(/^[A-Za-z0-9.-]+(:\d{1,5})?$/, { error: 'must be an address such as 10.0.0.5:6443' })
      .optional()
      .describe("The address (host or host:port, port 6443 by default) of your own load balancer in front of the machines' apiservers: fastplane only checks it."),
  })
  .strict()
  .describe('provider ssh: the control-plane endpoint of a Kubernetes control plane.');

export type SshEndpoint = z.infer<typeof SshEndpointSchema>;

const MAX_ETCD_BINARIES = 16;

/** Added to the provider's object schema; all optional, checked together by checkSshProvider. */
export const sshProviderFields = {
  // Bounded, as the API server bounds the cost of the CRD's rules on each host (docs/crds.md).
  hosts: z.array(SshHostSchema).max(100, { error: 'must be at most 100 hosts' }).optional().describe('provider ssh: the hosts machines run on; at least replicas + rollout.maxSurge, each address and port once.'),
  identityFile: z.string().min(1).optional().describe('provider ssh: the private key fastplane logs in with.'),
  knownHostsFile: z.string().min(1).optional().describe('provider ssh: the known_hosts file the host keys are verified with.'),
  etcdBinaries: z
    .record(z.string(), z.string().min(1))
    .refine((binaries) => Object.keys(binaries).length <= MAX_ETCD_BINARIES, { error: `must name at most ${String(MAX_ETCD_BINARIES)} versions` })
    // zod's JSON Schema has no bound for a refined record: say it, for the CRD.
    .meta({ maxProperties: MAX_ETCD_BINARIES })
    .optional().describe("provider ssh: the etcd binary per version on fastplane's side (default: the ones installed here)."),
  baseDir: z.string().regex(/^\/[^\0]*[^/]$/, { error: 'must be an absolute directory path' }).optional().describe('provider ssh: the directory on each host that holds the members.'),
  provision: ProvisionHooksSchema.optional(),
  endpoint: SshEndpointSchema.optional(),
};

interface SshProviderView {
  name: string;
  hosts?: SshHost[] | undefined;
  identityFile?: string | undefined;
  knownHostsFile?: string | undefined;
  provision?: unknown;
  endpoint?: SshEndpoint | undefined;
}

/** The provider fields only the ssh provider takes. */
export const SSH_ONLY_FIELDS = ['hosts', 'identityFile', 'knownHostsFile', 'provision', 'endpoint'] as const;

/**
 * Cross-field rules: what each provider needs, enough hosts for the replicas plus a rollout's surge,
 * and an endpoint exactly when the control plane runs Kubernetes.
 */
export function checkSshProvider(provider: SshProviderView, replicas: number, maxSurge: number, kubernetes: boolean, issue: (path: (string | number)[], message: string) => void): void {
  if (provider.name !== 'ssh') {
    for (const field of SSH_ONLY_FIELDS) if (provider[field] !== undefined) issue(['provider', field], SSH_MESSAGES.onlyForSsh(provider.name));
    return;
  }
  if (provider.identityFile === undefined) issue(['provider', 'identityFile'], SSH_MESSAGES.identityFile());
  if (provider.knownHostsFile === undefined) issue(['provider', 'knownHostsFile'], SSH_MESSAGES.knownHostsFile());
  const hosts = provider.hosts ?? [];
  if (provider.provision === undefined) {
    if (hosts.length < replicas + maxSurge) {
      issue(['provider', 'hosts'], SSH_MESSAGES.hostCount(String(replicas + maxSurge), String(hosts.length)));
    }
  } else if (hosts.length > 0) {
    issue(['provider', 'hosts'], SSH_MESSAGES.hostsOrProvision());
  }
  checkEndpoint(provider.endpoint, hosts, kubernetes, issue);
  const seen = new Set<string>();
  hosts.forEach((host, i) => {
    const key = `${host.address}:${String(host.port)}`;
    if (seen.has(key)) issue(['provider', 'hosts', i, 'address'], `duplicate host ${key}`);
    seen.add(key);
  });
}

function checkEndpoint(endpoint: SshEndpoint | undefined, hosts: readonly SshHost[], kubernetes: boolean, issue: (path: (string | number)[], message: string) => void): void {
  if (endpoint === undefined) {
    if (kubernetes) issue(['provider', 'endpoint'], SSH_MESSAGES.endpointRequired());
    return;
  }
  if (!kubernetes) issue(['provider', 'endpoint'], SSH_MESSAGES.endpointNeedsKubernetes());
  else if ((endpoint.host === undefined) === (endpoint.loadBalancer === undefined)) issue(['provider', 'endpoint'], endpoint.host === undefined ? SSH_MESSAGES.endpointRequired() : SSH_MESSAGES.endpointOneOf());
  const address = endpoint.host?.address;
  if (address !== undefined && hosts.some((host) => host.address === address)) issue(['provider', 'endpoint', 'host', 'address'], SSH_MESSAGES.endpointHostIsMachineHost(address));
}

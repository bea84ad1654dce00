import type { EndpointBackend } from '../../ports/machine-provider.ts';

/**
 * The haproxy.cfg of a control-plane endpoint, as kubeadm's HA guide writes it: a TCP frontend that
 * passes TLS through to the apiservers (each client checks the apiserver's certificate itself), round
 * robin, and an HTTPS `GET /readyz` health check per apiserver, without verifying its certificate.
 * docs/kubernetes.md ("The control-plane endpoint") says why each setting is what it is.
 */

export interface HaproxyConfigInput {
  /** host:port the frontend binds. */
  bind: string;
  backends: readonly EndpointBackend[];
  /** Where the server states saved before a reload are read from, so a reload keeps each server's health. */
  serverStateFile: string;
}

/** The backend whose servers are the apiservers; routes() reads its servers' states by this name. */
export const BACKEND = 'apiservers';

/** Check every second; out after 2 failed checks, back after 1 good one (docs/kubernetes.md). */
export const HEALTH_CHECK = { interMs: 1000, fall: 2, rise: 1 } as const;

// HAProxy's names take letters, digits and `-_.:`; anything else would not parse (or would inject).
const NAME = /^[A-Za-z0-9_.:-]+$/;
// host:port with no whitespace or comment sign, so an address is one word of the configuration.
const ADDRESS = /^[^\s#]+:\d{1,5}$/;

function checkAddress(what: string, address: string): void {
  if (!ADDRESS.test(address)) throw new Error(`${what} ${JSON.stringify(address)} is not host:port`);
}

export function renderHaproxyConfig({ bind, backends, serverStateFile }: HaproxyConfigInput): string {
  checkAddress('endpoint address', bind);
  const seen = new Set<string>();
  for (const { machine, address } of backends) {
    if (!NAME.test(machine)) throw new Error(`machine name ${JSON.stringify(machine)} cannot name an HAProxy server (letters, digits and -_.: only)`);
    if (seen.has(machine)) throw new Error(`machine ${machine} is listed twice`);
    seen.add(machine);
    checkAddress(`apiserver address of ${machine}`, address);
  }
  const { interMs, fall, rise } = HEALTH_CHECK;
  return [
    '# Written by fastplane: rewritten whole on every change of the apiservers it routes to.',
    'global',
    // Old workers keep their established connections after a reload, but not forever.
    '    hard-stop-after 5m',
    `    server-state-file ${serverStateFile}`,
    '',
    'defaults',
    '    mode tcp',
    '    timeout connect 5s',
    // Idle limits of a passed-through connection: long enough for a quiet watch.
    '    timeout client 1h',
    '    timeout server 1h',
    '    timeout check 3s',
    '    option redispatch',
    '    retries 1',
    '    load-server-state-from-file global',
    '',
    'frontend apiserver',
    `    bind ${bind}`,
    `    default_backend ${BACKEND}`,
    '',
    `backend ${BACKEND}`,
    '    balance roundrobin',
    '    option httpchk GET /readyz',
    '    http-check expect status 200',
    `    default-server check check-ssl verify none inter ${String(interMs)}ms fall ${String(fall)} rise ${String(rise)}`,
    ...backends.map(({ machine, address }) => `    server ${machine} ${address}`),
    '',
  ].join('\n');
}

import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import type { LabInfo } from './netlab.ts';

/**
 * An ssh provider with Kubernetes on the network lab: the lab's last host is the endpoint host (HAProxy
 * there), every other one a machine host. A manifest's `spec.provider` for any scenario, the matrix's
 * rows included.
 */
export function sshKubernetesProvider(info: LabInfo): Record<string, unknown> {
  const machineHosts = info.hosts.slice(0, -1);
  const endpointHost = info.hosts.at(-1);
  if (endpointHost === undefined || machineHosts.length === 0) throw new Error('the lab needs a machine host and an endpoint host');
  return {
    name: 'ssh',
    identityFile: info.identityFile,
    knownHostsFile: info.knownHostsFile,
    hosts: machineHosts.map((h) => ({ address: h.address, user: 'root' })),
    endpoint: { host: { address: endpointHost.address, user: 'root' } },
  };
}

/** Processes of the lab's hosts other than their sshd (and its sessions): what fastplane left running there. */
export function labProcesses(info: LabInfo): string[] {
  return info.hosts.flatMap((host) => {
    const pids = execFileSync('ip', ['netns', 'pids', host.namespace], { encoding: 'utf8' }).split('\n').filter((line) => /^\d+$/.test(line));
    return pids.flatMap((pid) => {
      let argv: string;
      try {
        argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ').trim();
      } catch {
        return [];
      }
      return argv === '' || argv.startsWith('sshd') || argv.startsWith('/usr/sbin/sshd') ? [] : [`${host.address}: ${pid} ${argv.slice(0, 160)}`];
    });
  });
}

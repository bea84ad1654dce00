import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import type { LabHost, LabInfo } from './netlab.ts';

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

/** The processes in a lab host's namespace, with their command lines (those that ended meanwhile left out). */
function hostProcesses(host: LabHost): { pid: number; argv: string[] }[] {
  const pids = execFileSync('ip', ['netns', 'pids', host.namespace], { encoding: 'utf8' }).split('\n').filter((line) => /^\d+$/.test(line));
  return pids.flatMap((pid) => {
    try {
      return [{ pid: Number(pid), argv: readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((arg) => arg !== '') }];
    } catch {
      return [];
    }
  });
}

/** Processes of the lab's hosts other than their sshd (and its sessions): what fastplane left running there. */
export function labProcesses(info: LabInfo): string[] {
  return info.hosts.flatMap((host) =>
    hostProcesses(host).flatMap(({ pid, argv }) => {
      const line = argv.join(' ');
      return line === '' || line.startsWith('sshd') || line.startsWith('/usr/sbin/sshd') ? [] : [`${host.address}: ${String(pid)} ${line.slice(0, 160)}`];
    }),
  );
}

/** PIDs of the program named `program` (etcd's versioned names included) running on the lab host at `address`. */
export function labPids(info: LabInfo, address: string, program: string): number[] {
  const host = info.hosts.find((h) => h.address === address);
  if (host === undefined) throw new Error(`${address} is not a lab host`);
  const named = (argv0: string): boolean => {
    const base = basename(argv0);
    return base === program || base.startsWith(`${program}-`);
  };
  return hostProcesses(host).filter(({ argv }) => named(argv[0] ?? '')).map(({ pid }) => pid);
}

import { execFileSync } from 'node:child_process';
import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { findKubernetesProgram } from '../../src/adapters/kubernetes/kubernetes-binaries.ts';
import { copyRecordOf, localSha256 } from '../../src/adapters/providers/ssh/remote-files.ts';
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

/**
 * The Kubernetes programs of `versions` installed on the lab's machine hosts (all but the endpoint
 * host) as an image bakes them in: each host's copy where the ssh provider puts it, with the record of
 * its sha256 that the provider writes after checking a copy, so the provider finds it and copies
 * nothing. Hard links: a few hundred MB per host cost no disk and no time. (Copying a program over ssh
 * is the same code for etcd's, which the etcd-only ssh tests copy to bare hosts.)
 */
export async function installKubernetesPrograms(info: LabInfo, versions: readonly string[]): Promise<void> {
  for (const host of info.hosts.slice(0, -1)) {
    mkdirSync(join(host.baseDir, 'bin'), { recursive: true });
    for (const version of versions) {
      for (const program of ['kube-apiserver', 'kube-controller-manager', 'kube-scheduler'] as const) {
        const local = findKubernetesProgram(program, version);
        const remote = join(host.baseDir, 'bin', `${program}-${version}`);
        rmSync(remote, { force: true });
        linkSync(local, remote);
        writeFileSync(copyRecordOf(remote), `${await localSha256(local)}\n`);
      }
    }
  }
}

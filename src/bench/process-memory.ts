import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KUBERNETES_COMPONENTS, type ComponentKind } from '../ports/machine-provider.ts';

/** The processes of a machine the bench weighs: its etcd member and its Kubernetes components, by kind. */
export type ComponentPids = Partial<Record<ComponentKind, number>>;

const pidIn = (file: string): number | undefined => {
  try {
    const pid = (JSON.parse(readFileSync(file, 'utf8')) as { pid?: unknown }).pid;
    return typeof pid === 'number' ? pid : undefined;
  } catch {
    // Not written yet, or the machine is gone.
    return undefined;
  }
};

/**
 * The PIDs the local provider recorded for a machine: the member's in `machine.json`, each
 * component's in `<component>.json`, in clusters/<cluster>/machines/<name>/ of the state dir.
 */
export function localComponentPids(stateDir: string, cluster: string, machine: string): ComponentPids {
  const dir = join(stateDir, 'clusters', cluster, 'machines', machine);
  const pids: ComponentPids = {};
  const etcd = pidIn(join(dir, 'machine.json'));
  if (etcd !== undefined) pids.etcd = etcd;
  for (const kind of KUBERNETES_COMPONENTS) {
    const pid = pidIn(join(dir, `${kind}.json`));
    if (pid !== undefined) pids[kind] = pid;
  }
  return pids;
}

/** A process's resident memory now (VmRSS of /proc/PID/status), in bytes; undefined when it is gone. */
export function residentBytes(pid: number): number | undefined {
  try {
    const match = /^VmRSS:\s+(\d+)\s+kB$/m.exec(readFileSync(`/proc/${String(pid)}/status`, 'utf8'));
    return match?.[1] === undefined ? undefined : Number(match[1]) * 1024;
  } catch {
    return undefined;
  }
}

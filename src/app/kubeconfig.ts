import { InvalidInputError } from '../api/errors.ts';
import { controlPlaneRecord } from './records.ts';
import type { Runtime } from './runtime.ts';

/**
 * An admin kubeconfig for a Kubernetes control plane: for its endpoint, or with `machine` for that
 * machine's own apiserver. Bad input (exit 2) for an etcd-only control plane or an unknown machine.
 */
export async function adminKubeconfig(runtime: Runtime, name: string, machine?: string): Promise<string> {
  const cp = await controlPlaneRecord(runtime, name);
  const kubernetes = runtime.provider(cp.manifest).kubernetes;
  if (cp.manifest.spec.kubernetes === undefined || kubernetes === undefined) {
    throw new InvalidInputError([`${name} runs etcd only (no spec.kubernetes): there is no Kubernetes API to reach; create a control plane with fastplane up --kubernetes VERSION`]);
  }
  if (machine === undefined) return kubernetes.adminKubeconfig(name, (await kubernetes.endpoint(name)).address);
  const names = (await runtime.store.listMachines(name)).map((m) => m.name);
  if (!names.includes(machine)) throw new InvalidInputError([`--machine: ${name} has no machine ${machine} (it has: ${names.join(', ') || 'none'})`]);
  return kubernetes.adminKubeconfig(name, await kubernetes.apiserverAddress(name, machine));
}

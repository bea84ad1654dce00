import type { ControlPlaneRecord } from '../domain/machine.ts';
import type { ComponentAction } from '../planner/types.ts';
import type { KubernetesMachines } from '../ports/machine-provider.ts';
import type { ExecutorDeps } from './executor-deps.ts';

// A Kubernetes control plane's component actions: each idempotent, run beside the other machine actions.

function kubernetesOf(deps: ExecutorDeps): KubernetesMachines {
  if (deps.provider.kubernetes === undefined) throw new Error('this provider does not run Kubernetes components');
  return deps.provider.kubernetes;
}

export async function runComponentAction(deps: ExecutorDeps, cp: ControlPlaneRecord, action: ComponentAction): Promise<string> {
  const kubernetes = kubernetesOf(deps);
  await deps.writer.verify();
  switch (action.kind) {
    case 'StartComponent': {
      const spec = cp.manifest.spec.kubernetes;
      if (spec === undefined) throw new Error('spec.kubernetes is not set');
      await kubernetes.startComponent(deps.cluster, action.machine, action.component, { version: spec.version, ...(spec.binaries === undefined ? {} : { binaries: spec.binaries }) }, deps.writer.fence);
      return action.component;
    }
    case 'StopComponents':
      await kubernetes.stopComponents(deps.cluster, action.machine, deps.writer.fence);
      return '';
    case 'RouteEndpoint':
      await kubernetes.route(deps.cluster, action.machines);
      return action.machines.length === 0 ? 'to no apiserver' : `to ${action.machines.join(', ')}`;
  }
}

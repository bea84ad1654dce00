import type { ComponentHealth, ControlPlaneEndpoint, KubernetesComponent, KubernetesMachines } from '../../src/ports/machine-provider.ts';
import type { KubernetesCare } from '../../src/care/kubernetes-restart.ts';

/**
 * Kubernetes components in memory: each machine's components run or not; a started apiserver is ready
 * only after `readyAfter` health reads (it loads, then connects to etcd), the others at their first
 * read after their start. Every change is logged in `calls`, and after each one `outages` counts the
 * moments the endpoint routed to no ready apiserver.
 */
export class FakeKubernetesMachines implements KubernetesMachines {
  readonly calls: string[] = [];
  routes: string[];
  /** Times the endpoint had no ready apiserver to route to, seen after each change. */
  outages = 0;
  /** Machines whose apiserver is not ready regardless (a broken one). */
  readonly broken = new Set<string>();
  private readonly running = new Map<string, Set<KubernetesComponent>>();
  /** Health reads each started component still needs before it answers healthy. */
  private readonly warming = new Map<string, number>();

  constructor(
    readonly names: string[],
    private readonly readyAfter = 2,
  ) {
    this.routes = [...names];
    for (const name of names) this.running.set(name, new Set(['kube-apiserver', 'kube-controller-manager', 'kube-scheduler']));
  }

  care(): KubernetesCare {
    return { machines: this, names: this.names, launch: () => ({ version: '1.36.3' }) };
  }

  private ready(name: string, component: KubernetesComponent): boolean {
    return !this.broken.has(name) && this.running.get(name)?.has(component) === true && (this.warming.get(`${name}/${component}`) ?? 0) === 0;
  }

  private check(): void {
    if (!this.routes.some((name) => this.ready(name, 'kube-apiserver'))) this.outages++;
  }

  startComponent(_cluster: string, name: string, component: KubernetesComponent): Promise<void> {
    const running = this.running.get(name) ?? new Set();
    if (!running.has(component)) {
      running.add(component);
      this.warming.set(`${name}/${component}`, component === 'kube-apiserver' ? this.readyAfter : 1);
      this.calls.push(`start ${name} ${component}`);
    }
    this.running.set(name, running);
    return Promise.resolve();
  }

  stopComponents(_cluster: string, name: string): Promise<void> {
    this.running.set(name, new Set());
    this.calls.push(`stop ${name}`);
    this.check();
    return Promise.resolve();
  }

  componentHealth(_cluster: string, name: string): Promise<Record<KubernetesComponent, ComponentHealth>> {
    const health = (component: KubernetesComponent): ComponentHealth => {
      const key = `${name}/${component}`;
      const ready = this.ready(name, component);
      const left = this.warming.get(key) ?? 0;
      if (left > 0) this.warming.set(key, left - 1);
      return ready ? { running: true, healthy: true } : { running: this.running.get(name)?.has(component) === true, healthy: false, reason: 'not ready' };
    };
    return Promise.resolve({ 'kube-apiserver': health('kube-apiserver'), 'kube-controller-manager': health('kube-controller-manager'), 'kube-scheduler': health('kube-scheduler') });
  }

  endpoint(): Promise<ControlPlaneEndpoint> {
    return Promise.reject(new Error('not here'));
  }

  route(_cluster: string, machines: readonly string[]): Promise<void> {
    this.routes = [...machines];
    this.calls.push(`route ${machines.join(',')}`);
    this.check();
    return Promise.resolve();
  }

  adminKubeconfig(): Promise<string> {
    return Promise.reject(new Error('not here'));
  }

  apiserverAddress(_cluster: string, name: string): Promise<string> {
    return Promise.resolve(`${name}:6443`);
  }

  renewClusterCertificates(_cluster: string, options: { nextEtcdCa?: boolean } = {}): Promise<void> {
    this.calls.push(options.nextEtcdCa === true ? 'renew cluster, etcd client from the next CA' : 'renew cluster');
    return Promise.resolve();
  }

  renewMachineCertificates(_cluster: string, name: string): Promise<void> {
    this.calls.push(`renew ${name}`);
    return Promise.resolve();
  }
}

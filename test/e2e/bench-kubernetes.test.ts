import assert from 'node:assert/strict';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { KUBERNETES_COMPONENTS } from '../../src/ports/machine-provider.ts';
import { CliEnv, pidsUnder } from '../support/cli.ts';
import { benchResultOf } from '../support/bench-run.ts';
import { TEST_KUBERNETES } from '../support/kubectl.ts';

const env = new CliEnv('127.58');
after(() => {
  env.cleanup();
});

const PROCESSES = ['etcd', ...KUBERNETES_COMPONENTS] as const;

describe('fastplane bench --kubernetes on real etcd and Kubernetes components', { timeout: 900_000 }, () => {
  test('an uninstalled Kubernetes version exits 2 naming what is installed, before anything starts', async () => {
    const bench = await env.run(['bench', '--kubernetes', '1.30.0', '--replicas', '3', '--provisioning-delay', '1s', '--modes', 'parallel', '-o', 'json']);
    assert.equal(bench.code, 2, bench.stderr);
    assert.match(bench.stderr, new RegExp(`Kubernetes 1\\.30\\.0 is not installed \\(found: [^)]*${TEST_KUBERNETES.replaceAll('.', '\\.')}`));
    assert.equal(bench.stdout, '');
  });

  test('every machine\'s apiserver is a milestone of the bound, and every process is weighed', async () => {
    const bench = await env.run(['bench', '--kubernetes', TEST_KUBERNETES, '--replicas', '3', '--provisioning-delay', '2s', '--modes', 'parallel,serial', '--runs', '1', '--timeout', '5m', '-o', 'json']);
    const result = benchResultOf(bench);
    assert.equal(result.settings.kubernetes, TEST_KUBERNETES);
    const k8s = result.calibration.kubernetes;
    assert.ok(k8s, 'the calibration timed the components');
    assert.ok(k8s.apiserverSamplesSeconds.length >= 5, 'at least 5 warm apiserver starts');
    assert.equal(k8s.apiserverSeconds, Math.min(k8s.coldSeconds.apiserver, ...k8s.apiserverSamplesSeconds), 'the bound takes the fastest start');
    assert.ok(k8s.apiserverSeconds > 0 && k8s.controllersSeconds > 0);
    // The local provider's processes are weighed: every sample's CPU read, the least of all kept.
    assert.equal(k8s.apiserverCpuSamplesSeconds?.length, k8s.apiserverSamplesSeconds.length, 'every warm apiserver start weighed');
    const apiserverCpu = k8s.apiserverCpuSeconds ?? 0;
    const controllersCpu = k8s.controllersCpuSeconds ?? 0;
    assert.ok(apiserverCpu > 0 && controllersCpu > 0, 'CPU of both steps measured');
    assert.equal(apiserverCpu, Math.min(k8s.coldCpuSeconds?.apiserver ?? Infinity, ...(k8s.apiserverCpuSamplesSeconds ?? [])), 'the bound takes the least CPU');
    for (const strategy of ['serial', 'parallel'] as const) {
      const run = result.runs[0]?.[strategy];
      assert.ok(run, `${strategy} ran`);
      assert.match(run.bound.design, /^Kubernetes control plane/);
      // The bound has an apiserver-ready milestone per machine, each at least its vote plus the calibrated start.
      assert.equal(run.bound.components?.length, 3);
      for (const c of run.bound.components ?? []) assert.ok(c.apiserverReadyAt >= c.voterAt + k8s.apiserverSeconds - 0.001);
      // The machines share the host's cores: the bound is the later of its critical path and their CPU work.
      const shared = run.bound.sharedCpu;
      assert.ok(shared, `${strategy}: a shared-CPU term`);
      assert.equal(shared.cores, result.host.cpus);
      assert.deepEqual(shared.work.map((w) => w.cpuSeconds), [0, 1, 2].map(() => apiserverCpu + controllersCpu));
      assert.equal(run.bound.seconds, Math.max(run.bound.criticalPathSeconds, shared.seconds));
      assert.equal(run.bound.binding, shared.seconds > run.bound.criticalPathSeconds ? 'shared-cpu' : 'critical-path');
      assert.equal(run.machines.length, 3);
      for (const m of run.machines) {
        const c = m.components;
        assert.ok(c?.apiserverStartSeconds != null && c.apiserverReadySeconds != null, `${strategy} ${m.name}: apiserver start and ready recorded`);
        assert.ok(c.apiserverReadySeconds - c.apiserverStartSeconds >= k8s.apiserverSeconds - 0.02, `${strategy} ${m.name}: no apiserver started faster than calibrated`);
        assert.ok(c.controllersStartSeconds != null && c.controllersStartSeconds > c.apiserverStartSeconds, `${strategy} ${m.name}: controllers start after the apiserver`);
        for (const kind of PROCESSES) assert.ok((m.peakRssBytes?.[kind] ?? 0) > 0, `${strategy} ${m.name}: peak RSS of ${kind}`);
      }
      const memory = run.memory;
      assert.ok(memory && memory.samples > 0);
      const largestMachine = Math.max(...run.machines.map((m) => PROCESSES.reduce((sum, kind) => sum + (m.peakRssBytes?.[kind] ?? 0), 0)));
      assert.ok(memory.controlPlanePeakRssBytes > 0 && memory.controlPlanePeakRssBytes >= Math.max(...run.machines.map((m) => m.peakRssBytes?.['kube-apiserver'] ?? 0)));
      assert.ok(memory.controlPlanePeakRssBytes <= 3 * largestMachine, 'the sum at one moment is no more than every machine at its peak');
    }
    assert.deepEqual(pidsUnder(join(env.stateDir, 'bench')), [], 'bench stops every process it started');
  });
});

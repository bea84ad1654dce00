import assert from 'node:assert/strict';
import { test } from 'node:test';
import { criticalPathBound, type BoundInputs } from '../../src/bench/critical-path-bound.ts';
import { kubernetesCalibration, type KubernetesSample } from '../../src/bench/kubernetes-calibration.ts';
import { milestonesAhead } from '../../src/bench/milestones.ts';
import { cpuSeconds } from '../../src/bench/process-cpu.ts';
import { sharedCpuTerm } from '../../src/bench/shared-cpu-bound.ts';
import { etcdOnlyExample, kubernetesExample } from '../support/bound-example.ts';

// The example of test/support/bound-example.ts: a critical path ending at 45 (the last machine
// ready: voter 38, apiserver 44, controllers 45).
const etcdOnly = etcdOnlyExample;
const example = kubernetesExample;
const onCores = (cores: number, apiserverCpuSeconds: number, controllersCpuSeconds: number): BoundInputs => ({
  ...etcdOnly,
  kubernetes: { apiserverSeconds: 6, controllersSeconds: 1, cpu: { cores, apiserverCpuSeconds, controllersCpuSeconds } },
});

test('the CPU work binds when it over the cores takes longer than the critical path', () => {
  // 5 + 1 CPU seconds per machine on 1 core. From 30: all three machines, 18 s of CPU -> 48; from
  // 30.5: two, 12 -> 42.5; from 31: one, 6 -> 37. The latest is 48, after the critical path's 45.
  const bound = criticalPathBound(onCores(1, 5, 1));
  assert.equal(bound.criticalPathSeconds, 45);
  assert.equal(bound.binding, 'shared-cpu');
  assert.equal(bound.seconds, 48);
  assert.deepEqual(
    bound.sharedCpu && { cores: bound.sharedCpu.cores, from: bound.sharedCpu.fromSeconds, cpu: bound.sharedCpu.cpuSecondsFrom, seconds: bound.sharedCpu.seconds },
    { cores: 1, from: 30, cpu: 18, seconds: 48 },
  );
  assert.deepEqual(
    bound.sharedCpu?.work.map((w) => [w.machine, w.releaseAt, w.cpuSeconds]),
    [
      [0, 30, 6],
      [1, 31, 6],
      [2, 30.5, 6],
    ],
  );
  assert.match(bound.design, /; every machine's start-up CPU done on the host's 1 shared cores$/);
});

test('with cores enough for the work, the critical path binds and the term is kept to compare', () => {
  // The same work on 2 cores: from 30, 18 / 2 -> 39, before 45; on 8 cores, 30 + 2.25.
  const two = criticalPathBound(onCores(2, 5, 1));
  assert.equal(two.binding, 'critical-path');
  assert.equal(two.seconds, 45);
  assert.equal(two.sharedCpu?.seconds, 39);
  const eight = criticalPathBound(onCores(8, 5, 1));
  assert.equal(eight.seconds, 45);
  assert.equal(eight.sharedCpu?.seconds, 32.25);
});

test('work released late counts from its release: a late machine\'s CPU cannot be done early', () => {
  // 10 CPU seconds each on 2 cores. All ready at 0: 30 / 2 -> 15.
  const early = sharedCpuTerm(2, [0, 0, 0].map((releaseAt, machine) => ({ machine, releaseAt, cpuSeconds: 10 })));
  assert.equal(early?.seconds, 15);
  // One ready at 100: from 0, 15; from 100, its own 10 / 2 -> 105. Spare cores before 100 do not help it.
  const late = sharedCpuTerm(2, [0, 0, 100].map((releaseAt, machine) => ({ machine, releaseAt, cpuSeconds: 10 })));
  assert.deepEqual(late && [late.fromSeconds, late.cpuSecondsFrom, late.seconds], [100, 10, 105]);
  // Two ready at 10: from 0, 30 / 2 -> 15; from 10, 20 / 2 -> 20, the middle release binds.
  const middle = sharedCpuTerm(2, [0, 10, 10].map((releaseAt, machine) => ({ machine, releaseAt, cpuSeconds: 10 })));
  assert.deepEqual(middle && [middle.fromSeconds, middle.cpuSecondsFrom, middle.seconds], [10, 20, 20]);
  assert.equal(sharedCpuTerm(2, []), null);
});

test('without CPU figures, or etcd only, the critical path is the bound and says so', () => {
  const plain = criticalPathBound(example);
  assert.deepEqual([plain.binding, plain.seconds, plain.criticalPathSeconds, plain.sharedCpu], ['critical-path', 45, 45, undefined]);
  const etcd = criticalPathBound(etcdOnly);
  assert.deepEqual([etcd.binding, etcd.seconds, etcd.criticalPathSeconds], ['critical-path', 38, 38]);
});

test('the milestones stay the critical path\'s when the CPU term binds', () => {
  const bound = criticalPathBound(onCores(1, 5, 1));
  // On the critical path's schedule (apiservers at 37, 39, 44), long before the bound's 48: no milestone ahead.
  const apiservers = [37, 39, 44].map((readyAt, i) => ({ machine: `m${String(i + 1)}`, readyAt, startToReadySeconds: 6 }));
  assert.deepEqual(milestonesAhead(bound, 2, { initServingAt: 31, promotedAt: [33, 38], catchUps: [], apiservers }, 6), []);
  // An apiserver ready before the critical path allows is still caught.
  assert.deepEqual(
    milestonesAhead(bound, 2, { initServingAt: 31, promotedAt: [33, 38], catchUps: [], apiservers: [{ machine: 'm1', readyAt: 36, startToReadySeconds: 6 }] }, 6).map((a) => a.milestone),
    ['apiserver ready 1'],
  );
});

test('the calibration keeps the least CPU of every sample it could read, and none when it read none', () => {
  const sample = (apiserverCpu: number | null, controllersCpu: number | null): KubernetesSample => ({ apiserver: 3, controllers: 0.4, apiserverCpu, controllersCpu });
  const k = kubernetesCalibration('1.36.3', { cold: sample(6.1, 1.2), warm: [sample(4.2, 0.9), sample(null, null), sample(3.9, 1.1)] });
  assert.deepEqual([k.apiserverCpuSeconds, k.controllersCpuSeconds], [3.9, 0.9]);
  assert.deepEqual([k.apiserverCpuSamplesSeconds, k.controllersCpuSamplesSeconds, k.coldCpuSeconds], [[4.2, 3.9], [0.9, 1.1], { apiserver: 6.1, controllers: 1.2 }]);
  const unread = kubernetesCalibration('1.36.3', { cold: sample(null, null), warm: [sample(null, null)] });
  assert.deepEqual([unread.apiserverCpuSeconds, unread.controllersCpuSeconds], [null, null]);
});

test('a process\'s CPU read from /proc agrees with what it measures of itself', () => {
  const before = process.cpuUsage();
  const read = cpuSeconds(process.pid);
  const after = process.cpuUsage();
  assert.ok(read !== undefined);
  // /proc counts in clock ticks and splits the kernel's precise runtime into them by sampling, so on a
  // loaded host it can stray from getrusage's figure by more than a tick; a wrong unit (ticks taken as ms,
  // or as seconds) would be off tenfold or more.
  const low = (before.user + before.system) / 1e6;
  const high = (after.user + after.system) / 1e6;
  assert.ok(read >= low * 0.5 - 0.05 && read <= high * 2 + 0.05, `${String(read)} s read, ${String(low)}-${String(high)} s measured`);
  assert.equal(cpuSeconds(2 ** 22 + 1), undefined, 'a PID above the kernel\'s limit is no process');
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { apiserversReady, kubernetesRestartStep, restartKubernetes } from '../../src/care/kubernetes-restart.ts';
import type { StepResult } from '../../src/care/steps.ts';
import { NOT_STARTED, type RollingProgress } from '../../src/domain/care-job.ts';
import { FakeKubernetesMachines } from '../support/fake-kubernetes-machines.ts';
import { virtualClock } from '../support/fake-etcd-cluster.ts';

const noLease = { verify: (): Promise<void> => Promise.resolve() };
const kindOf = (r: StepResult): string => (r.kind === 'RequeueAfter' || r.kind === 'Error' ? `${r.kind} ${r.reason}` : r.kind);
/** As a pass keeps it: written to a record and read back. */
const stored = (progress: RollingProgress): RollingProgress => JSON.parse(JSON.stringify(progress)) as RollingProgress;

describe('a rolling restart of Kubernetes components, one step at a time', () => {
  test('one machine at a time: out of the endpoint, stopped, renewed, apiserver started; back in once ready, then its controller-manager and scheduler', async () => {
    const fake = new FakeKubernetesMachines(['m1', 'm2', 'm3']);
    const renew = (name: string): Promise<void> => fake.renewMachineCertificates('k', name);
    let progress = NOT_STARTED;
    const kinds: string[] = [];
    for (let i = 0; i < 40 && kinds.at(-1) !== 'Done'; i++) {
      const next = await kubernetesRestartStep('k', fake.care(), noLease, stored(progress), renew);
      kinds.push(kindOf(next.result));
      progress = next.progress;
    }
    assert.equal(kinds.at(-1), 'Done', kinds.join(', '));
    assert.deepEqual(progress.done, ['m1', 'm2', 'm3']);
    assert.ok(kinds.includes('RequeueAfter APIServerNotReady'), 'it waited for an apiserver, never sleeping');
    assert.ok(kinds.includes('RequeueAfter ComponentsNotHealthy'), 'it waited for the controller-manager and the scheduler');
    assert.equal(fake.outages, 0, 'the endpoint always routed to a ready apiserver');
    // A repeated step routes again to the same machines: route() is idempotent, so only changes count.
    const routedLast = (calls: string[], i: number): string | undefined => calls.slice(0, i).filter((c) => c.startsWith('route')).at(-1);
    const m1 = fake.calls.slice(0, fake.calls.indexOf('stop m2')).filter((call, i, all) => call !== routedLast(all, i));
    assert.deepEqual(m1, ['route m2,m3', 'stop m1', 'renew m1', 'start m1 kube-apiserver', 'route m1,m2,m3', 'start m1 kube-controller-manager', 'start m1 kube-scheduler', 'route m1,m3']);
    assert.deepEqual(fake.routes, ['m1', 'm2', 'm3'], 'every machine routed to again at the end');
  });

  test("another machine's apiserver not ready holds the next restart; nothing is stopped until it is", async () => {
    const fake = new FakeKubernetesMachines(['m1', 'm2', 'm3']);
    fake.broken.add('m2');
    const held = await kubernetesRestartStep('k', fake.care(), noLease, NOT_STARTED, () => Promise.resolve());
    assert.equal(kindOf(held.result), 'RequeueAfter APIServerNotReady');
    assert.match(held.result.kind === 'RequeueAfter' ? held.result.message : '', /the apiserver of m2 is not ready/);
    assert.deepEqual(fake.calls, []);
    assert.deepEqual(held.progress, NOT_STARTED);
    assert.equal(kindOf((await apiserversReady('k', fake.care())) ?? { kind: 'Done', summary: '' }), 'RequeueAfter APIServerNotReady', 'the etcd restarts wait at the same gate');
    fake.broken.delete('m2');
    assert.equal(await apiserversReady('k', fake.care()), undefined);
    const moved = await kubernetesRestartStep('k', fake.care(), noLease, NOT_STARTED, () => Promise.resolve());
    assert.equal(kindOf(moved.result), 'Continue');
    assert.equal(moved.progress.awaiting, 'm1');
  });

  test('driven whole (as a CA rotation does): it sleeps only between steps, and fails when an apiserver never comes back', async () => {
    const fake = new FakeKubernetesMachines(['m1', 'm2']);
    const clock = virtualClock();
    await restartKubernetes('k', fake.care(), { lease: noLease, clock, patienceMs: 10_000, onNote: () => undefined });
    assert.ok(clock.slept.length > 0 && clock.slept.every((ms) => ms === 500), JSON.stringify(clock.slept));
    assert.equal(fake.calls.filter((c) => c.startsWith('stop')).length, 2);
    const stuck = new FakeKubernetesMachines(['m1', 'm2'], Number.MAX_SAFE_INTEGER);
    await assert.rejects(restartKubernetes('k', stuck.care(), { lease: noLease, clock: virtualClock(), patienceMs: 10_000, onNote: () => undefined }), /the apiserver of m1 is not ready yet/);
    assert.deepEqual(stuck.routes, ['m2'], 'the machine that did not come back is left out of the endpoint');
    assert.equal(stuck.calls.filter((c) => c.startsWith('stop')).length, 1, 'the next machine was never stopped');
  });
});

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { advanceJob, type JobStep } from '../../src/care/care-job.ts';
import { renewalStep, rotateCertificateAuthority, type RenewDeps } from '../../src/care/certificates.ts';
import { maintenanceStep, type MaintainDeps } from '../../src/care/maintain.ts';
import { done, failed, proceed, requeueAfter, type StepResult } from '../../src/care/steps.ts';
import { startCareJob, type CareJobRecord } from '../../src/domain/care-job.ts';
import type { MachineRecord } from '../../src/domain/machine.ts';
import type { EtcdMaintenance } from '../../src/ports/etcd-maintenance.ts';
import type { CaRotationPhase } from '../../src/ports/machine-provider.ts';
import { FakeCluster, virtualClock } from '../support/fake-etcd-cluster.ts';
import { FakeKubernetesMachines } from '../support/fake-kubernetes-machines.ts';

const PATIENCE = 60_000;
const noLease = { verify: (): Promise<void> => Promise.resolve() };
/** As a pass keeps it: written to the record and read back by the next pass, maybe in another process. */
const stored = (job: CareJobRecord): CareJobRecord => JSON.parse(JSON.stringify(job)) as CareJobRecord;

function scripted(results: StepResult[]): JobStep {
  return (job, note) => {
    const result = results.shift() ?? failed('Extra', 'asked once too often');
    if (result.kind === 'Continue') note(result.note);
    return Promise.resolve({ result, job: { ...job, stage: `after ${result.kind}` } });
  };
}

describe('a care job, one pass at a time', () => {
  test('a pass runs its steps until one waits, and the record says what for and when to ask again', async () => {
    const clock = virtualClock();
    const job = await advanceJob(scripted([proceed('one'), proceed('two'), requeueAfter(200, 'VoterNotBack', 'b is not back')]), startCareJob('RenewCertificates', 'RenewalDue', 0), clock, PATIENCE);
    assert.equal(job.ended, undefined);
    assert.deepEqual(job.waiting, { reason: 'VoterNotBack', message: 'b is not back', retryAfterMs: 200 });
    assert.deepEqual(job.notes, ['one', 'two']);
    assert.deepEqual(clock.slept, [], 'a pass never sleeps: the loop asks again');
  });

  test('Done ends it ok, Error ends it failed; waiting past its patience since the last progress ends it failed', async () => {
    const clock = virtualClock();
    const ok = await advanceJob(scripted([proceed('one'), done('3 members')]), startCareJob('RunMaintenance', 'MaintenanceDue', 0), clock, PATIENCE);
    assert.deepEqual(ok.ended, { at: 0, ok: true, summary: '3 members' });
    const error = await advanceJob(scripted([failed('VoterLeft', 'member b left')]), startCareJob('RunMaintenance', 'MaintenanceDue', 0), clock, PATIENCE);
    assert.deepEqual(error.ended, { at: 0, ok: false, summary: 'member b left' });
    const waited = { ...startCareJob('RenewCertificates', 'RenewalDue', 0), progressAt: 1000 };
    await clock.sleep(1000 + PATIENCE - 1);
    assert.equal((await advanceJob(scripted([requeueAfter(200, 'VoterNotBack', 'b')]), waited, clock, PATIENCE)).ended, undefined);
    await clock.sleep(1);
    assert.deepEqual((await advanceJob(scripted([requeueAfter(200, 'VoterNotBack', 'b')]), waited, clock, PATIENCE)).ended, { at: clock.now(), ok: false, summary: 'b' });
  });
});

/** The voters a, b, c behind machines m-a, m-b, m-c; a member the provider stops stays down until the test brings it back. */
function renewalCluster(): { cluster: FakeCluster; calls: string[]; deps: () => RenewDeps } {
  const cluster = new FakeCluster(['a', 'b', 'c']);
  const calls: string[] = [];
  const machines = ['a', 'b', 'c'].map((id) => ({ name: `m-${id}`, peerURL: `http://${id}:2380`, clientURL: `http://${id}:2379` }) as MachineRecord);
  const provider = {
    renewClientCertificate: () => Promise.resolve(void calls.push('client')),
    stopMember: (_c: string, machine: string) => {
      calls.push(`stop ${machine}`);
      cluster.down.add(machine.slice(2));
      return Promise.resolve();
    },
    renewMemberCertificates: (_c: string, machine: string) => Promise.resolve(void calls.push(`renew ${machine}`)),
    caRotationPhase: () => Promise.resolve(undefined),
    advanceCaRotation: () => Promise.resolve(),
  };
  const deps = (): RenewDeps => ({
    cluster: 't',
    withAdmin: (use) => use(cluster.admin),
    provider,
    machines,
    start: (machine) => Promise.resolve(void calls.push(`start ${machine.name}`)),
    lease: noLease,
    clock: virtualClock(),
    healthTimeoutMs: PATIENCE,
    onNote: () => undefined,
  });
  return { cluster, calls, deps };
}

describe('certificate renewal as passes', () => {
  test('each pass restarts at most one member and waits for it; resumed from the record alone, followers first, the leader last', async () => {
    const { cluster, calls, deps } = renewalCluster();
    const clock = virtualClock();
    let job = startCareJob('RenewCertificates', 'RenewalDue', 0);
    const waits: string[] = [];
    for (let pass = 0; pass < 20 && job.ended === undefined; pass++) {
      const before = calls.filter((c) => c.startsWith('stop')).length;
      // A new step each pass: nothing is carried between passes but the record.
      job = stored(await advanceJob(renewalStep(deps(), cluster.admin), stored(job), clock, PATIENCE));
      assert.ok(calls.filter((c) => c.startsWith('stop')).length - before <= 1, `pass ${String(pass)} restarted one member at most`);
      if (job.waiting) waits.push(job.waiting.reason);
      cluster.down.clear();
    }
    assert.equal(job.ended?.ok, true, JSON.stringify(job));
    assert.deepEqual(calls, ['client', 'stop m-b', 'renew m-b', 'start m-b', 'stop m-c', 'renew m-c', 'start m-c', 'stop m-a', 'renew m-a', 'start m-a']);
    assert.deepEqual(job.rolling.done, ['b', 'c', 'a']);
    assert.equal(waits.filter((w) => w === 'VoterNotBack').length, 3, JSON.stringify(waits));
    assert.deepEqual(cluster.moves, ['b'], 'leadership moved off a before it restarted');
    assert.match(job.notes.join('; '), /renewed the certificates of m-a and restarted it/);
  });
});

describe('certificate renewal of a Kubernetes control plane as passes', () => {
  test('the members first, each only while every apiserver is ready; then the Kubernetes clients, then each machine\'s components', async () => {
    const { cluster, calls, deps } = renewalCluster();
    const fake = new FakeKubernetesMachines(['m-a', 'm-b', 'm-c']);
    // Each member stopped while the endpoint routes to the other machines only.
    const routedAtStop: string[] = [];
    const withKubernetes = (): RenewDeps => {
      const base = deps();
      const stopMember: RenewDeps['provider']['stopMember'] = async (c, machine, fence) => {
        routedAtStop.push(`${machine}: ${fake.routes.join(',')}`);
        await base.provider.stopMember(c, machine, fence);
      };
      return { ...base, provider: { ...base.provider, stopMember }, kubernetes: fake.care() };
    };
    const clock = virtualClock();
    fake.broken.add('m-c');
    let job = stored(await advanceJob(renewalStep(withKubernetes(), cluster.admin), startCareJob('RenewCertificates', 'RenewalDue', 0), clock, PATIENCE));
    assert.equal(job.waiting?.reason, 'APIServerNotReady', JSON.stringify(job));
    assert.deepEqual(calls, ['client'], 'no member stopped while an apiserver is not ready');
    fake.broken.delete('m-c');
    const stages: string[] = [];
    for (let pass = 0; pass < 60 && job.ended === undefined; pass++) {
      job = stored(await advanceJob(renewalStep(withKubernetes(), cluster.admin), job, clock, PATIENCE));
      stages.push(job.stage);
      cluster.down.clear();
    }
    assert.equal(job.ended?.ok, true, JSON.stringify(job));
    assert.equal(calls.filter((c) => c.startsWith('renew')).length, 3, 'every member renewed once');
    assert.ok(stages.indexOf('apiservers') > stages.lastIndexOf('members'), stages.join(', '));
    assert.deepEqual(fake.calls.filter((c) => c.startsWith('renew') || c.startsWith('stop')), ['renew cluster', 'stop m-a', 'renew m-a', 'stop m-b', 'renew m-b', 'stop m-c', 'renew m-c']);
    assert.equal(fake.outages, 0);
    assert.deepEqual(routedAtStop, ['m-b: m-a,m-c', 'm-c: m-a,m-b', 'm-a: m-b,m-c']);
    assert.match(job.notes.join('; '), /renewed the Kubernetes client certificates; .*renewed the apiserver certificate of m-c and restarted its components/);
    assert.equal(job.ended.summary, 'restarted the Kubernetes components of 3 machines');
  });
});

describe('a CA rotation of a Kubernetes control plane', () => {
  test('the components restart after each phase, never mid-phase: an etcd client of the new etcd CA after the first, every Kubernetes leaf anew after the second', async () => {
    const { cluster, calls, deps } = renewalCluster();
    const fake = new FakeKubernetesMachines(['m-a', 'm-b', 'm-c']);
    const stops = (list: string[]): number => list.filter((c) => c.startsWith('stop')).length;
    const phases: string[] = [];
    let phase: CaRotationPhase | undefined;
    const base = deps();
    const provider: RenewDeps['provider'] = {
      ...base.provider,
      caRotationPhase: () => Promise.resolve(phase),
      advanceCaRotation: (_c, next, fence) => {
        phase = next;
        phases.push(`${next ?? 'ended'}: ${String(stops(calls))} member stops, ${String(stops(fake.calls))} component stops, fence ${String(fence)}`);
        return Promise.resolve();
      },
    };
    const start = (machine: MachineRecord): Promise<void> => {
      cluster.down.delete(machine.name.slice(2));
      return Promise.resolve();
    };
    // Each phase change carries the lease's fence, as every destructive provider call does.
    await rotateCertificateAuthority({ ...base, provider, start, kubernetes: fake.care(), lease: { ...noLease, fence: 4 } });
    assert.deepEqual(phases, ['trust: 0 member stops, 0 component stops, fence 4', 'reissue: 3 member stops, 3 component stops, fence 4', 'drop: 6 member stops, 6 component stops, fence 4', 'ended: 9 member stops, 9 component stops, fence 4']);
    const renewed = fake.calls.indexOf('renew cluster, etcd client from the next CA');
    assert.ok(renewed >= 0 && renewed < fake.calls.indexOf('stop m-a'), 'the etcd client from the new CA is in place before the first component restart');
    // The second restart: the clients' certificates first, then each serving certificate while its machine's components are stopped.
    const second = fake.calls.slice(fake.calls.indexOf('renew cluster'));
    assert.deepEqual(second.filter((c) => c.startsWith('renew') || c.startsWith('stop')).slice(0, 7), ['renew cluster', 'stop m-a', 'renew m-a', 'stop m-b', 'renew m-b', 'stop m-c', 'renew m-c']);
    assert.equal(fake.calls.filter((c) => c.startsWith('renew cluster')).length, 2);
    assert.equal(fake.outages, 0);
  });
});

function fakeMaintenance(cluster: FakeCluster): EtcdMaintenance & { log: string[] } {
  const log: string[] = [];
  const sizes: Record<string, { dbSize: number; dbSizeInUse: number }> = { a: { dbSize: 100, dbSizeInUse: 10 }, b: { dbSize: 100, dbSizeInUse: 95 }, c: { dbSize: 100, dbSizeInUse: 20 } };
  const id = (endpoint: string): string => new URL(endpoint).hostname;
  return {
    log,
    usage: (endpoint) => Promise.resolve({ revision: 500, memberId: id(endpoint), ...(sizes[id(endpoint)] ?? { dbSize: 0, dbSizeInUse: 0 }) }) as ReturnType<EtcdMaintenance['usage']>,
    compact: (_e, revision) => Promise.resolve(void log.push(`compact ${String(revision)}`)),
    defragment: (endpoint) => Promise.resolve(void log.push(`defragment ${id(endpoint)}`)),
    disarm: (_e, alarm) => {
      log.push(`disarm ${alarm.memberId}`);
      cluster.alarms = [];
      return Promise.resolve();
    },
    snapshot: () => Promise.reject(new Error('not here')),
    countKeys: () => Promise.reject(new Error('not here')),
    close: () => Promise.resolve(),
  };
}

async function toTheEnd(step: JobStep, start: CareJobRecord): Promise<CareJobRecord> {
  let job = start;
  for (let pass = 0; pass < 20 && job.ended === undefined; pass++) job = stored(await advanceJob(step, stored(job), virtualClock(), PATIENCE));
  return job;
}

describe('maintenance as passes', () => {
  const deps = (cluster: FakeCluster, maintenance: EtcdMaintenance): MaintainDeps => ({ admin: cluster.admin, maintenance, endpoints: ['http://a:2379'], lease: noLease, clock: virtualClock(), healthTimeoutMs: PATIENCE, onNote: () => undefined });

  test('compacts to the retained window, defragments the fragmented members only (leader last), disarms nothing', async () => {
    const cluster = new FakeCluster(['a', 'b', 'c']);
    const maintenance = fakeMaintenance(cluster);
    const job = await toTheEnd(maintenanceStep(deps(cluster, maintenance), { retainRevisions: 100, fragmentationThreshold: 0.5 }), startCareJob('RunMaintenance', 'MaintenanceDue', 0));
    assert.equal(job.ended?.ok, true, JSON.stringify(job));
    assert.deepEqual(maintenance.log, ['compact 400', 'defragment c', 'defragment a']);
    assert.match(job.notes.join('; '), /b: 5% free pages, below the threshold/);
  });

  test('under a NOSPACE alarm: all history compacted, every member defragmented, then the alarm disarmed', async () => {
    const cluster = new FakeCluster(['a', 'b', 'c']);
    cluster.alarms = [{ memberId: 'b', alarm: 'NOSPACE' }];
    const maintenance = fakeMaintenance(cluster);
    const job = await toTheEnd(maintenanceStep(deps(cluster, maintenance), { retainRevisions: 1000, fragmentationThreshold: 0.3 }), startCareJob('RecoverNoSpace', 'NoSpaceAlarm', 0));
    assert.equal(job.ended?.ok, true, JSON.stringify(job));
    assert.deepEqual(maintenance.log, ['compact 500', 'defragment b', 'defragment c', 'defragment a', 'disarm b']);
  });
});

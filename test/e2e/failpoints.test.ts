import assert from 'node:assert/strict';
import { after, describe, test } from 'node:test';
import type { FailpointName } from '../../src/executor/failpoints.ts';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { CliEnv, membershipChanges, statusOf } from '../support/cli.ts';
import { askEtcd } from '../support/etcd-direct.ts';

const env = new CliEnv('127.76');
/** Cases of one describe that run at once: each starts its own etcd members and CLI runs. */
const CASES_AT_ONCE = 4;
after(() => {
  env.cleanup();
});

async function converge(args: string[]): Promise<ControlPlaneStatusDocument> {
  const run = await env.run([...args, '--timeout', '90s', '-o', 'json']);
  assert.equal(run.code, 0, run.stderr);
  return statusOf(run.stdout);
}

/** Runs the command with the failpoint armed; the CLI must die there by SIGKILL. */
async function crashAt(failpoint: FailpointName, args: string[]): Promise<void> {
  const run = await env.run([...args, '--timeout', '90s'], { FASTPLANE_FAILPOINTS: failpoint });
  assert.equal(run.signal, 'SIGKILL', `failpoint ${failpoint} was reached (exit ${String(run.code)}: ${run.stderr.slice(-400)})`);
}

/** The invariants of docs/architecture.md after convergence, asked of etcd and of the recorded changes. */
async function assertConvergedSafely(cluster: string, doc: ControlPlaneStatusDocument, replicas: number, version: string): Promise<void> {
  const { members, statuses } = await askEtcd(doc.status);
  assert.equal(members.filter((m) => !m.isLearner).length, replicas, 'voters == replicas (invariant 7)');
  assert.equal(members.filter((m) => m.isLearner).length, 0, 'no learners (invariant 7)');
  assert.equal(statuses.length, replicas, 'every member answers');
  assert.ok(statuses.every((s) => s.version === version && s.errors.length === 0 && s.leaderId !== '0'), 'every member healthy at the version');
  assert.equal(doc.status.machines.length, replicas, 'no machine without a member');
  const changes = membershipChanges(env.events(cluster));
  assert.ok(changes.filter((e) => e.action === 'InitCluster').length <= 1, 'one InitCluster (invariant 1)');
  for (let i = 1; i < changes.length; i++) {
    assert.ok((changes[i - 1]!.endedAt ?? 0) <= changes[i]!.at, 'membership changes never overlap (invariant 3)');
  }
}

// Each path on 3.4.23, the oldest version supported, and on 3.6.17, the default (whose members joining
// after the first ~100 entries get a snapshot: docs/etcd-behaviour.md); one cluster per path and version.
// The cases share no cluster (each has its own name, so its own address slot), so a few run at once:
// a case mostly waits on etcd and on the CLI's start. The longest ones are declared first, so they start first.
for (const version of ['3.4.23', '3.6.17']) {
  const tag = version.replace(/\./g, '');
  describe(`SIGKILL at each failpoint on etcd ${version}, then run again: converges with the invariants intact`, { timeout: 1_200_000, concurrency: CASES_AT_ONCE }, () => {
    // One cluster for every scale-down failpoint: 5 → 3, killed, converged at 3, then back to 5.
    test('scale down 5 → 3, killed at each failpoint on the way', async () => {
      const name = `down${tag}`;
      await converge(['up', '-f', env.writeManifest(name, { replicas: 5, version })]);
      // (after-move-leader is reached by the rollout below: there every member, the leader too, goes.)
      for (const failpoint of ['after-remove-member', 'before-delete-machine', 'after-provider-delete'] as const) {
        await crashAt(failpoint, ['scale', name, '--replicas', '3']);
        const doc = await converge(['up', '--name', name]);
        await assertConvergedSafely(name, doc, 3, version);
        await converge(['scale', name, '--replicas', '5']);
      }
      assert.equal((await env.run(['down', name])).code, 0);
    });

    // One 3-member cluster rolled once per failpoint: a new quota is a template change, so every member
    // is replaced (surge first, leader moved off each outgoing member).
    test('rollout of 3 members, killed at each failpoint on the way', async () => {
      const name = `roll${tag}`;
      const manifest = (quotaMiB: number): string => env.writeManifest(name, { replicas: 3, version, etcd: { quotaBackendBytes: quotaMiB * 1024 * 1024 } });
      await converge(['up', '-f', manifest(2048)]);
      const failpoints = ['after-add-learner', 'after-promote', 'after-move-leader', 'after-remove-member', 'after-provider-delete'] as const;
      for (const [index, failpoint] of failpoints.entries()) {
        await crashAt(failpoint, ['up', '-f', manifest(2049 + index)]);
        const doc = await converge(['up', '--name', name]);
        await assertConvergedSafely(name, doc, 3, version);
      }
      assert.equal((await env.run(['down', name])).code, 0);
    });

    // Before the first join nothing depends on etcd's version (a record, a machine, one member started
    // alone): those failpoints run on the default version only.
    const beforeAnyJoin: FailpointName[] = version === '3.6.17' ? ['after-create-record', 'after-provider-create', 'after-init-record', 'after-init-start'] : [];
    const scaleUp: FailpointName[] = [
      ...beforeAnyJoin,
      'after-add-learner-call',
      'after-add-learner',
      'before-start-member',
      'after-start-member',
      'after-promote',
    ];
    for (const failpoint of scaleUp) {
      test(`scale up 0 → 3, killed at ${failpoint}`, async () => {
        const name = `up${tag}-${failpoint}`.slice(0, 40);
        await crashAt(failpoint, ['up', '-f', env.writeManifest(name, { replicas: 3, version })]);
        const doc = await converge(['up', '--name', name]);
        await assertConvergedSafely(name, doc, 3, version);
        assert.equal((await env.run(['down', name])).code, 0);
      });
    }
  });
}

describe('a version rollout of one member, killed after its removal', { timeout: 600_000, concurrency: true }, () => {
  for (const [from, to] of [
    ['3.4.23', '3.5.16'],
    ['3.6.17', '3.7.4'],
  ] as const) {
    test(`rollout ${from} → ${to}`, async () => {
      const name = `roll-version-${from.replace(/\./g, '')}`;
      await converge(['up', '-f', env.writeManifest(name, { replicas: 1, version: from })]);
      await crashAt('after-remove-member', ['rollout', name, '--version', to]);
      const doc = await converge(['up', '--name', name]);
      await assertConvergedSafely(name, doc, 1, to);
      assert.equal((await env.run(['down', name])).code, 0);
    });
  }
});

import assert from 'node:assert/strict';
import { statusOf } from './cli.ts';
import { waitFor } from './controller-replica.ts';
import { adminFor, kvClientFor, type ClusterAccess } from './etcd-direct.ts';
import { etcdPidsByURL, overlappingChanges, readPrefix, type RowRun } from './matrix-scenario.ts';

/** What the downgrade row runs: from a 3.6 version to a 3.5 one, with `keys` values of 4 KiB under `prefix`. */
export interface DowngradePlan {
  from: string;
  to: string;
  keys: number;
  prefix: string;
}

/** `keys` values of 4 KiB, 100 puts at a time: enough data that the joiners take a while to catch up, so several overlap. */
async function putBulk(access: ClusterAccess, plan: DowngradePlan): Promise<void> {
  const kv = kvClientFor(access);
  const value = 'v'.repeat(4096);
  try {
    for (let i = 0; i < plan.keys; i += 100) {
      await Promise.all(Array.from({ length: 100 }, (_, j) => kv.put(`${plan.prefix}${String(i + j).padStart(5, '0')}`).value(value)));
    }
  } finally {
    kv.close();
  }
}

/**
 * The learner limit across a downgrade: one member on `plan.from` grown to five by several learners at
 * once, then rolled out to `plan.to` (whose limit is 1) by etcd's downgrade protocol, every member
 * restarted in place. Each member, asked alone after its restart what it has applied, must list the
 * members every other lists, and no acknowledged put and no seeded key may be missing on any member.
 */
export async function downgradeAfterLearners(run: RowRun, plan: DowngradePlan): Promise<void> {
  const { name, ok, step } = run;
  const one = statusOf((await step('up 1', () => ok('up 1', ['up', '-f', run.manifest, '--timeout', run.stepTimeout, '-o', 'json']))).stdout);
  assert.equal(one.status.voters, 1);
  await putBulk(one.status, plan);
  let access: ClusterAccess = one.status;
  const { probe, writer } = await run.watch(one, () => access.endpoints);

  let doc = statusOf((await step('scale 5', () => ok('scale 5', ['scale', name, '--replicas', '5', '--timeout', run.stepTimeout, '-o', 'json']))).stdout);
  access = doc.status;
  assert.equal(doc.status.voters, 5);
  assert.ok(probe.maxLearners >= 2, `several learners caught up at once (most listed: ${String(probe.maxLearners)})`);
  const grown = etcdPidsByURL(doc.status.endpoints);

  // The membership is settled: from here every member's own list must be the cluster's.
  probe.compareEachMember = true;
  doc = statusOf((await step('downgrade', () => ok('rollout (downgrade)', ['rollout', name, '--version', plan.to, '--timeout', run.stepTimeout, '-o', 'json']))).stdout);
  access = doc.status;
  assert.deepEqual(
    doc.status.machines.map((m) => m.version),
    doc.status.machines.map(() => plan.to),
    'every member restarted in place on the lower version',
  );
  const restarted = etcdPidsByURL(doc.status.endpoints);
  for (const [url, pids] of restarted) {
    assert.ok(pids.length > 0 && !pids.some((pid) => grown.get(url)?.includes(pid)), `${url} runs a new process after the downgrade`);
  }
  // Each member's process since its restart has answered at least once with the cluster's member list.
  await waitFor('every restarted member to have listed the members', () => ([...restarted.values()].every((pids) => pids.some((pid) => probe.agreedPids.has(pid))) ? true : undefined), 20_000);
  await writer.stop();
  await probe.stop();
  assert.deepEqual(probe.disagreements, [], 'no member ever listed other members than the cluster after the grow');

  const admin = adminFor(access);
  try {
    const lists = await Promise.all(access.endpoints.map(async (endpoint) => (await admin.memberList([endpoint], { linearizable: false })).map((m) => `${m.id}${m.isLearner ? ' (learner)' : ''}`).sort()));
    const [reference] = lists;
    assert.equal(reference?.length, 5, JSON.stringify(lists));
    assert.ok(reference.every((m) => !m.endsWith('(learner)')), JSON.stringify(reference));
    for (const [i, list] of lists.entries()) assert.deepEqual(list, reference, `${access.endpoints[i] ?? ''} lists what the others list`);
  } finally {
    await admin.close();
  }
  for (const endpoint of access.endpoints) {
    const reader = kvClientFor(access, [endpoint]);
    try {
      assert.equal(await reader.getAll().prefix(plan.prefix).count(), plan.keys, `every seeded key through ${endpoint}`);
    } finally {
      reader.close();
    }
  }
  const final = await readPrefix(access, writer.prefix);
  const lost = writer.acks.filter((a) => final[a.key] !== a.value).map((a) => a.key);
  assert.deepEqual(lost, [], `${String(lost.length)} of ${String(writer.acks.length)} acknowledged keys lost`);
  const events = await run.events();
  assert.equal(events.filter((e) => e.result === 'ok' && e.action === 'PromoteLearner').length, 4, 'four learners promoted');
  assert.deepEqual(overlappingChanges(events), [], 'no two membership changes overlapped');
  console.log(`${name}: ${String(writer.acks.length)} puts acknowledged (${String(writer.failures)} failed), most learners listed ${String(probe.maxLearners)}, ${String(probe.agreedPids.size)} member processes listed the same members`);

  await step('down', () => ok('down', ['down', name]));
}

import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { EtcdAdminError, type EtcdErrorKind } from '../../src/ports/etcd-admin.ts';
import type { MachineInfra } from '../../src/ports/machine-provider.ts';
import { ModelEtcdAdmin, ModelProvider } from '../../src/sim/model-adapters.ts';
import { MEASURED_TIMINGS } from '../../src/sim/model-timings.ts';
import { ModelWorld } from '../../src/sim/model-world.ts';
import { seededRandom } from '../../src/sim/random.ts';
import { VirtualClock } from '../../src/sim/virtual-clock.ts';
import { defineEtcdAdminContract, type ContractWorld } from './etcd-admin-contract.ts';

/**
 * The same contract real etcd passes (real-etcd.test.ts), run against the simulator's model on virtual
 * time. When the two disagree, the model is what gets fixed: the property tests and the simulator are
 * only as good as the model is faithful.
 */
function modelWorld(version: string, seed: number): Promise<ContractWorld> {
  const clock = new VirtualClock(1_700_000_000_000);
  // Real machines are never ready at once; a short provisioning delay keeps the polling honest.
  const world = new ModelWorld(clock, seededRandom(seed), { ...MEASURED_TIMINGS, provisioning: { minMs: 0, maxMs: 300 } });
  return Promise.resolve({
    admin: new ModelEtcdAdmin(world),
    provider: new ModelProvider(world),
    clock,
    cluster: 'contract',
    version,
    teardown: () => Promise.resolve(),
  });
}

defineEtcdAdminContract('EtcdAdmin contract: ModelEtcdAdmin + ModelProvider (etcd 3.4.23 rules)', () => modelWorld('3.4.23', 1));
defineEtcdAdminContract('EtcdAdmin contract: ModelEtcdAdmin + ModelProvider (etcd 3.5.16 rules)', () => modelWorld('3.5.16', 2));

/**
 * Behaviour measured as docs/etcd-behaviour.md describes (or read from etcd's strict reconfiguration checks) that the shared
 * contract does not exercise, because it needs a dead member or a precise moment. Each case cites the
 * lab section it encodes; these are the rules the property tests lean on.
 */
describe('model: lab facts beyond the shared contract', () => {
  const VERSION = '3.4.23';
  const CLUSTER = 'lab';

  function lab(seed = 7) {
    const clock = new VirtualClock(1_700_000_000_000);
    const world = new ModelWorld(clock, seededRandom(seed));
    const admin = new ModelEtcdAdmin(world);
    const provider = new ModelProvider(world);
    let ordinal = 0;
    const launch = (name: string, initialCluster: string, state: 'new' | 'existing') => ({ memberName: name, version: VERSION, initialCluster, initialClusterState: state, clusterToken: 'lab', maxLearners: 1 });

    async function machine(): Promise<MachineInfra> {
      ordinal++;
      return provider.create({ cluster: CLUSTER, name: `m${String(ordinal)}`, ordinal });
    }
    async function retry<T>(call: () => Promise<T>, kinds: EtcdErrorKind[]): Promise<T> {
      for (let i = 0; ; i++) {
        try {
          return await call();
        } catch (error) {
          if (!(error instanceof EtcdAdminError) || !kinds.includes(error.kind) || i > 200) throw error;
          await clock.sleep(100);
        }
      }
    }
    /** A voter-only cluster of n members, every one connected for longer than the 5 s rule. */
    async function cluster(n: number): Promise<{ infra: MachineInfra; id: string }[]> {
      const first = await machine();
      await provider.startMember(CLUSTER, first.name, launch(first.name, `${first.name}=${first.peerURL}`, 'new'));
      const nodes = [{ infra: first, id: (await retry(() => admin.memberList([first.clientURL]), ['Timeout']))[0]!.id }];
      while (nodes.length < n) {
        const next = await machine();
        const { member, members } = await retry(() => admin.addLearner([first.clientURL], next.peerURL), ['UnhealthyCluster']);
        const initial = members.map((m) => `${m.id === member.id ? next.name : m.name}=${m.peerURLs[0] ?? ''}`).join(',');
        await provider.startMember(CLUSTER, next.name, launch(next.name, initial, 'existing'));
        await retry(() => admin.promoteLearner([first.clientURL], member.id), ['NotInSync']);
        nodes.push({ infra: next, id: member.id });
      }
      await clock.sleep(MEASURED_TIMINGS.peerHealthGateMs);
      return nodes;
    }
    async function rejects(call: Promise<unknown>, kind: EtcdErrorKind): Promise<void> {
      await assert.rejects(call, (error: unknown) => error instanceof EtcdAdminError && error.kind === kind);
    }
    return { clock, world, admin, provider, machine, cluster, rejects, retry, launch };
  }

  test('a down voter can be removed (etcd: "downed member is safe to remove"; lab 2.0: removing the unstarted voter works)', async () => {
    const { world, admin, cluster } = lab();
    const [a, b, c] = await cluster(3);
    world.killMember(c!.infra.name);
    await admin.removeMember([a!.infra.clientURL, b!.infra.clientURL], c!.id);
    assert.deepEqual((await admin.memberList([a!.infra.clientURL])).map((m) => m.id).sort(), [a!.id, b!.id].sort());
  });

  test('with a voter down, adds are refused as UnhealthyCluster (lab 2.1.1) and so is removing a live voter that quorum needs', async () => {
    const { world, admin, cluster, machine, rejects } = lab();
    const [a, b, c] = await cluster(3);
    world.killMember(c!.infra.name);
    const extra = await machine();
    await rejects(admin.addLearner([a!.infra.clientURL], extra.peerURL), 'UnhealthyCluster');
    // 2 of 3 run; removing b would leave 1 connected of 2: etcd refuses.
    await rejects(admin.removeMember([a!.infra.clientURL], b!.id), 'UnhealthyCluster');
  });

  test('the 5 s rule also holds a voter removal right after a promotion (lab 2.1.1)', async () => {
    const { clock, admin, provider, cluster, machine, launch, retry, rejects } = lab();
    const [first] = await cluster(1);
    const second = await machine();
    const { member, members } = await admin.addLearner([first!.infra.clientURL], second.peerURL);
    const initial = members.map((m) => `${m.id === member.id ? second.name : m.name}=${m.peerURLs[0] ?? ''}`).join(',');
    await provider.startMember('lab', second.name, launch(second.name, initial, 'existing'));
    await retry(() => admin.promoteLearner([first!.infra.clientURL], member.id), ['NotInSync']);
    await rejects(admin.removeMember([first!.infra.clientURL], member.id), 'UnhealthyCluster');
    await clock.sleep(MEASURED_TIMINGS.peerHealthGateMs);
    await admin.removeMember([first!.infra.clientURL], member.id);
  });

  test('re-adding a peer URL in the second of its removal is MemberNotFound; 1.2 s later it works (lab 2.1.2)', async () => {
    const { clock, admin, cluster, machine, rejects } = lab();
    const [a] = await cluster(1);
    const m = await machine();
    const { member } = await admin.addLearner([a!.infra.clientURL], m.peerURL);
    const intoSecond = clock.now() % 1000;
    if (intoSecond > 500) await clock.sleep(1000 - intoSecond);
    await admin.removeMember([a!.infra.clientURL], member.id);
    await rejects(admin.addLearner([a!.infra.clientURL], m.peerURL), 'MemberNotFound');
    await clock.sleep(1200);
    assert.equal((await admin.addLearner([a!.infra.clientURL], m.peerURL)).member.isLearner, true);
  });

  test('without quorum: linearizable memberList times out, the local one answers, status has no leader (lab 2.0)', async () => {
    const { world, admin, cluster, rejects } = lab();
    const [a, b, c] = await cluster(3);
    world.killMember(b!.infra.name);
    world.killMember(c!.infra.name);
    await rejects(admin.memberList([a!.infra.clientURL]), 'Timeout');
    assert.equal((await admin.memberList([a!.infra.clientURL], { linearizable: false })).length, 3);
    const status = await admin.status(a!.infra.clientURL);
    assert.equal(status.leaderId, '0');
    assert.deepEqual(status.errors, ['etcdserver: no leader']);
    // A removal is a raft proposal: it needs the quorum it cannot have (even of a down member).
    await rejects(admin.removeMember([a!.infra.clientURL], c!.id), 'Timeout');
  });

  test('a learner refuses member calls; a remove served by its own target succeeds but says ServerStopped (lab 3, 2.1.3)', async () => {
    const { admin, cluster, machine, provider, launch, rejects } = lab();
    const [a, b] = await cluster(2);
    const m = await machine();
    const { member, members } = await admin.addLearner([a!.infra.clientURL], m.peerURL);
    await provider.startMember('lab', m.name, launch(m.name, members.map((x) => `${x.id === member.id ? m.name : x.name}=${x.peerURLs[0] ?? ''}`).join(','), 'existing'));
    await rejects(admin.memberList([m.clientURL]), 'LearnerRpc');
    await rejects(admin.moveLeader(a!.infra.clientURL, member.id), 'BadLeaderTransferee');
    await rejects(admin.removeMember([b!.infra.clientURL], b!.id), 'ServerStopped');
    assert.equal((await admin.memberList([a!.infra.clientURL], { linearizable: false })).some((x) => x.id === b!.id), false);
  });

  test('a member started as existing that was never added exits at once (lab 2.0: "member count is unequal")', async () => {
    const { admin, cluster, machine, provider, launch } = lab();
    const [a] = await cluster(1);
    const stray = await machine();
    await provider.startMember('lab', stray.name, launch(stray.name, `${a!.infra.name}=${a!.infra.peerURL},${stray.name}=${stray.peerURL}`, 'existing'));
    assert.equal((await provider.describe('lab', stray.name))?.memberRunning, false);
    assert.equal((await admin.memberList([a!.infra.clientURL])).length, 1);
  });

  test('after the leader is removed a new leader is elected in about 1.4 s (lab 2.1.3: 1.3-1.5 s)', async () => {
    const { clock, admin, cluster } = lab();
    const nodes = await cluster(3);
    const { leaderId } = await admin.status(nodes[0]!.infra.clientURL);
    const rest = nodes.filter((n) => n.id !== leaderId);
    await admin.removeMember(rest.map((n) => n.infra.clientURL), leaderId);
    const removedAt = clock.now();
    let elected: number | undefined;
    while (elected === undefined) {
      if ((await admin.status(rest[0]!.infra.clientURL)).leaderId !== '0') elected = clock.now();
      else await clock.sleep(100);
    }
    assert.ok(elected - removedAt >= 1300 && elected - removedAt <= 1500, `elected after ${String(elected - removedAt)} ms`);
  });

  test('the model knows its leader: it flags a removal of the leader, or one asked while no leader is known (invariant 5)', async () => {
    const { clock, world, admin, cluster, rejects } = lab();
    const nodes = await cluster(5);
    const at = (id: string) => nodes.find((n) => n.id === id)!.infra;
    const { leaderId } = await admin.status(nodes[0]!.infra.clientURL);
    const others = nodes.filter((n) => n.id !== leaderId);
    // A voter that has not heard of the new leader names the old one; the others name the new one.
    world.transferLeadership(others[0]!.infra.name, others[1]!.infra.name, 3000);
    assert.equal((await admin.status(others[1]!.infra.clientURL)).leaderId, leaderId);
    assert.equal((await admin.status(others[2]!.infra.clientURL)).leaderId, others[0]!.id);
    await clock.sleep(3000);
    assert.equal((await admin.status(others[1]!.infra.clientURL)).leaderId, others[0]!.id, 'the laggard catches up');
    assert.equal(world.violations.length, 0);
    // etcd itself lets the leader go (it steps down), so the call succeeds: the model flags it.
    await admin.removeMember([at(leaderId).clientURL], others[0]!.id);
    assert.deepEqual(world.violations.map((v) => v.rule), ['invariant-5']);
    assert.match(world.violations[0]!.detail, /removal of the leader/);
    // The removed leader's process exits; while the others elect a new one, a removal is refused and flagged.
    await clock.sleep(500);
    await rejects(admin.removeMember([others[1]!.infra.clientURL], others[2]!.id), 'Timeout');
    assert.deepEqual(world.violations.map((v) => v.rule), ['invariant-5', 'invariant-5']);
    assert.match(world.violations[1]!.detail, /no leader for 500 ms/);
  });
});

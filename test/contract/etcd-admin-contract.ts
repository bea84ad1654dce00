import assert from 'node:assert/strict';
import { after, afterEach, before, describe, test } from 'node:test';
import type { Clock } from '../../src/ports/clock.ts';
import { EtcdAdminError, type EtcdAdmin, type EtcdErrorKind, type EtcdMember } from '../../src/ports/etcd-admin.ts';
import type { InfraProvider, MachineInfra } from '../../src/ports/machine-provider.ts';

/**
 * What fastplane relies on from etcd, written against the ports only, so the same cases run against
 * real etcd (Etcd3Admin + LocalProcessProvider) and against the simulator's model. Every case builds
 * its own cluster; polling goes through world.clock so virtual time works too.
 */
export interface ContractWorld {
  admin: EtcdAdmin;
  provider: InfraProvider;
  clock: Clock;
  /** Provider cluster that holds every machine of the suite. */
  cluster: string;
  /** etcd version the members run. */
  version: string;
  teardown(): Promise<void>;
}

/** A started member: its machine, member ID and cluster token. */
interface Node {
  infra: MachineInfra;
  id: string;
  token: string;
}

const POLL_MS = 100;
const WAIT_MS = 20_000;

export function defineEtcdAdminContract(label: string, setup: () => Promise<ContractWorld>): void {
  // The cases share one world and clean up after each other: one at a time, also where the suites run at once.
  describe(label, { concurrency: 1 }, () => {
    let world: ContractWorld;
    let nextOrdinal = 1;
    let created: string[] = [];

    before(async () => {
      world = await setup();
    });
    after(async () => {
      await world.teardown();
    });
    // Stop what each case started, so the suite never runs more members than one case needs.
    afterEach(async () => {
      await Promise.all(created.map((name) => world.provider.delete(world.cluster, name)));
      created = [];
    });

    async function eventually<T>(what: string, probe: () => Promise<T | undefined>): Promise<T> {
      const deadline = world.clock.now() + WAIT_MS;
      let last: unknown;
      for (;;) {
        try {
          const value = await probe();
          if (value !== undefined) return value;
        } catch (error) {
          last = error;
        }
        if (world.clock.now() > deadline) throw new Error(`timed out waiting for ${what}`, { cause: last });
        await world.clock.sleep(POLL_MS);
      }
    }

    /** Retries `call` while it fails with one of `kinds` (etcd's "try again later" answers). */
    async function retryWhile<T>(kinds: readonly EtcdErrorKind[], call: () => Promise<T>): Promise<T> {
      const deadline = world.clock.now() + WAIT_MS;
      for (;;) {
        try {
          return await call();
        } catch (error) {
          const retry = error instanceof EtcdAdminError && kinds.includes(error.kind) && world.clock.now() < deadline;
          if (!retry) throw error;
          await world.clock.sleep(POLL_MS);
        }
      }
    }

    async function rejectsWith(call: Promise<unknown>, kind: EtcdErrorKind): Promise<void> {
      await assert.rejects(call, (error: unknown) => {
        assert.ok(error instanceof EtcdAdminError, `expected EtcdAdminError, got ${String(error)}`);
        assert.equal(error.kind, kind, error.message);
        return true;
      });
    }

    async function machine(): Promise<MachineInfra> {
      const ordinal = nextOrdinal++;
      const name = `m${String(ordinal)}`;
      created.push(name);
      await world.provider.create({ cluster: world.cluster, name, ordinal });
      return eventually(`${name} provisioned`, async () => {
        const infra = await world.provider.describe(world.cluster, name);
        return infra?.state === 'Provisioned' ? infra : undefined;
      });
    }

    /** A fresh one-member cluster, once its member has published itself (it has a leader then). */
    async function single(): Promise<Node> {
      const infra = await machine();
      const token = `${world.cluster}-${infra.name}`;
      await world.provider.startMember(world.cluster, infra.name, {
        memberName: infra.name,
        version: world.version,
        initialCluster: `${infra.name}=${infra.peerURL}`,
        initialClusterState: 'new',
        clusterToken: token,
        maxLearners: 1,
      });
      const id = await eventually('the first member to serve', async () => {
        const members = await world.admin.memberList([infra.clientURL]);
        return members.find((member) => member.name === infra.name)?.id;
      });
      return { infra, id, token };
    }

    /** Adds a learner for a new machine without starting it. */
    async function addLearner(cluster: Node): Promise<{ infra: MachineInfra; member: EtcdMember; members: EtcdMember[] }> {
      const infra = await machine();
      const added = await retryWhile(['UnhealthyCluster'], () => world.admin.addLearner([cluster.infra.clientURL], infra.peerURL));
      return { infra, ...added };
    }

    /** Adds a learner and starts it with the membership from the add; resolves once it serves status. */
    async function startedLearner(cluster: Node): Promise<Node> {
      const { infra, member, members } = await addLearner(cluster);
      const initialCluster = members
        .map((m) => `${m.id === member.id ? infra.name : m.name}=${m.peerURLs[0] ?? ''}`)
        .join(',');
      await world.provider.startMember(world.cluster, infra.name, {
        memberName: infra.name,
        version: world.version,
        initialCluster,
        initialClusterState: 'existing',
        clusterToken: cluster.token,
        maxLearners: 1,
      });
      await eventually('the learner to serve status', async () => ((await world.admin.status(infra.clientURL)).isLearner ? true : undefined));
      return { infra, id: member.id, token: cluster.token };
    }

    /** Resolves once the promoted member has applied its promotion too (it refuses voter RPCs until then). */
    async function promote(cluster: Node, learner: Node): Promise<void> {
      await retryWhile(['NotInSync'], () => world.admin.promoteLearner([cluster.infra.clientURL], learner.id));
      await eventually('the promoted member to know it votes', async () => ((await world.admin.status(learner.infra.clientURL)).isLearner ? undefined : true));
    }

    test('a fresh one-member cluster lists one voter with a decimal-string ID', async () => {
      const first = await single();
      const members = await world.admin.memberList([first.infra.clientURL]);
      assert.equal(members.length, 1);
      const [member] = members;
      assert.match(member?.id ?? '', /^[1-9]\d*$/);
      assert.deepEqual(member, {
        id: first.id,
        name: first.infra.name,
        peerURLs: [first.infra.peerURL],
        clientURLs: [first.infra.clientURL],
        isLearner: false,
      });
    });

    test('memberList moves on past an unreachable endpoint and works unlinearized', async () => {
      const first = await single();
      const down = await machine();
      const members = await world.admin.memberList([down.clientURL, first.infra.clientURL], { linearizable: false });
      assert.deepEqual(members.map((m) => m.id), [first.id]);
      await rejectsWith(world.admin.memberList([down.clientURL]), 'Unreachable');
    });

    test('addLearner returns the unstarted learner and the full membership', async () => {
      const first = await single();
      const { infra, member, members } = await addLearner(first);
      assert.match(member.id, /^[1-9]\d*$/);
      assert.deepEqual({ ...member, id: '' }, { id: '', name: '', peerURLs: [infra.peerURL], clientURLs: [], isLearner: true });
      assert.deepEqual(members.map((m) => m.id).sort(), [first.id, member.id].sort());
      assert.deepEqual(members.find((m) => m.id === member.id), member);
    });

    test('a second learner is refused with TooManyLearners', async () => {
      const first = await single();
      await addLearner(first);
      const other = await machine();
      await rejectsWith(world.admin.addLearner([first.infra.clientURL], other.peerURL), 'TooManyLearners');
    });

    test('promoting an unstarted learner is NotInSync', async () => {
      const first = await single();
      const { member } = await addLearner(first);
      await rejectsWith(world.admin.promoteLearner([first.infra.clientURL], member.id), 'NotInSync');
    });

    test('a started learner reports isLearner, then promotes to a voter', async () => {
      const first = await single();
      const learner = await startedLearner(first);
      const status = await world.admin.status(learner.infra.clientURL);
      assert.equal(status.memberId, learner.id);
      assert.equal(status.leaderId, first.id);
      await promote(first, learner);
      const members = await world.admin.memberList([first.infra.clientURL]);
      assert.deepEqual(members.find((m) => m.id === learner.id), {
        id: learner.id,
        name: learner.infra.name,
        peerURLs: [learner.infra.peerURL],
        clientURLs: [learner.infra.clientURL],
        isLearner: false,
      });
    });

    test('promoting a voter is NotALearner', async () => {
      const first = await single();
      await rejectsWith(world.admin.promoteLearner([first.infra.clientURL], first.id), 'NotALearner');
    });

    test('removing an unknown member is MemberNotFound', async () => {
      const first = await single();
      await rejectsWith(world.admin.removeMember([first.infra.clientURL], '1234567890123456789'), 'MemberNotFound');
    });

    test('removing a learner works at once', async () => {
      const first = await single();
      const { member } = await addLearner(first);
      await world.admin.removeMember([first.infra.clientURL], member.id);
      assert.deepEqual((await world.admin.memberList([first.infra.clientURL])).map((m) => m.id), [first.id]);
    });

    test("the leader's status names itself as leader", async () => {
      const first = await single();
      const status = await world.admin.status(first.infra.clientURL);
      assert.equal(status.memberId, first.id);
      assert.equal(status.leaderId, first.id);
      assert.equal(status.isLearner, false);
      assert.equal(status.version, world.version);
      assert.ok(status.raftIndex > 0 && status.raftAppliedIndex > 0 && status.raftTerm > 0 && status.dbSize > 0);
      assert.deepEqual(status.errors, []);
      assert.deepEqual(await world.admin.alarms([first.infra.clientURL]), []);
    });

    test('moveLeader sent to a non-leader is NotLeader; sent to the leader it moves leadership', async () => {
      const first = await single();
      const second = await startedLearner(first);
      await promote(first, second);
      const { leaderId } = await world.admin.status(first.infra.clientURL);
      const [leader, follower] = leaderId === first.id ? [first, second] : [second, first];
      await rejectsWith(world.admin.moveLeader(follower.infra.clientURL, leader.id), 'NotLeader');
      await world.admin.moveLeader(leader.infra.clientURL, follower.id);
      await eventually('the new leader', async () => ((await world.admin.status(follower.infra.clientURL)).leaderId === follower.id ? true : undefined));
    });

    test('adding an existing peer URL is PeerURLExists', async () => {
      const first = await single();
      await rejectsWith(
        retryWhile(['UnhealthyCluster'], () => world.admin.addLearner([first.infra.clientURL], first.infra.peerURL)),
        'PeerURLExists',
      );
    });

    test('right after a promotion, adding the next learner eventually succeeds (the 5 s health gate)', async () => {
      const first = await single();
      const second = await startedLearner(first);
      const third = await machine();
      await promote(first, second);
      // etcd may answer UnhealthyCluster for up to ~5 s; only eventual success is deterministic.
      const { member } = await retryWhile(['UnhealthyCluster'], () => world.admin.addLearner([first.infra.clientURL], third.peerURL));
      assert.equal(member.isLearner, true);
    });

    test("a removed member's process exits by itself", async () => {
      const first = await single();
      const learner = await startedLearner(first);
      assert.equal((await world.provider.describe(world.cluster, learner.infra.name))?.memberRunning, true);
      await world.admin.removeMember([first.infra.clientURL], learner.id);
      await eventually('the removed member to exit', async () => {
        const infra = await world.provider.describe(world.cluster, learner.infra.name);
        return infra?.memberRunning === false ? true : undefined;
      });
    });
  });
}

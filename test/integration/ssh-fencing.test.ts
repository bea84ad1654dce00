import assert from 'node:assert/strict';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { findEtcdBinary } from '../../src/adapters/etcd/etcd-binaries.ts';
import { SshProvider } from '../../src/adapters/providers/ssh/ssh-provider.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import { LeaseKeeper } from '../../src/lease/lease-keeper.ts';
import { systemClock } from '../../src/ports/clock.ts';
import { StaleFenceError, type MemberLaunch } from '../../src/ports/machine-provider.ts';
import { CliEnv } from '../support/cli.ts';
import { NetLab, type LabInfo } from '../support/netlab.ts';

// A lease holder deposed while its provisioning is in flight on a lab host: its create hook is held
// back, a new holder takes the lease over and provisions and starts the machine's member, then the
// old call goes on. The host's fence refuses it before it writes anything, and nothing of the new
// holder's is touched: the member runs on, its data dir is there, the machine is not marked Failed;
// the deposed holder's later start, stop, certificate renewal and delete are refused there too.

const lab = new NetLab(70);
// The lab's addresses are not loopback; the prefix only names this file's environment.
const env = new CliEnv('127.45');
const CLUSTER = 'fence';
const NAME = 'fence-1';
const HOLD = join(env.stateDir, 'hold');
const HELD = join(env.stateDir, 'held');
const RELEASE = join(env.stateDir, 'release');
let info: LabInfo;
const providers: SshProvider[] = [];
const keepers: LeaseKeeper[] = [];
const store = new MemoryStateStore();

/**
 * The create hook answers the lab's first host. While HOLD exists, one call takes it, says so in HELD
 * and waits for RELEASE: the deposed holder's provisioning, slow as a cloud API can be.
 */
function hook(): string {
  const answer = JSON.stringify({ address: info.hosts[0]?.address ?? '-', port: 22, user: 'root' });
  return `cat >/dev/null; if [ -e '${HOLD}' ]; then rm -f '${HOLD}'; : >'${HELD}'; while [ ! -e '${RELEASE}' ]; do sleep 0.1; done; fi; echo '${answer}'`;
}

/** One fastplane process's provider: the deposed holder's and the new holder's share only the store. */
function provider(): SshProvider {
  const made = new SshProvider({
    stateDir: env.stateDir,
    hosts: [],
    identityFile: info.identityFile,
    knownHostsFile: info.knownHostsFile,
    baseDir: '/var/lib/fastplane',
    findBinary: findEtcdBinary,
    version: '3.4.23',
    store,
    provision: { create: hook(), timeoutMs: 120_000 },
    stopGraceMs: 2_000,
  });
  providers.push(made);
  return made;
}

async function take(force: boolean): Promise<LeaseKeeper> {
  const keeper = await LeaseKeeper.acquire(store, CLUSTER, { clock: systemClock, force });
  assert.ok(keeper, 'the lease was taken');
  keepers.push(keeper);
  return keeper;
}

async function until(what: () => Promise<boolean> | boolean): Promise<void> {
  while (!(await what())) await new Promise((resolve) => setTimeout(resolve, 100));
}

const launch = (peerURL: string): MemberLaunch => ({ memberName: NAME, version: '3.4.23', initialCluster: `${NAME}=${peerURL}`, initialClusterState: 'new', clusterToken: 'ssh-fence', maxLearners: 1 });

describe('the lease fence on an ssh host', { timeout: 300_000 }, () => {
  before(() => {
    info = lab.up(1);
  });
  after(async () => {
    await Promise.all(keepers.map((k) => k.release()));
    await Promise.all(providers.map((p) => p.close()));
    // Stops every process of the lab's host (its etcd too) by PID and removes its namespaces.
    lab.down();
    env.cleanup();
  });

  test('a holder deposed mid-provisioning touches nothing of the new holder\'s machine', async () => {
    const deposed = await take(false);
    writeFileSync(HOLD, '');
    const late = provider();
    const lateCreate = late.create({ cluster: CLUSTER, name: NAME, ordinal: 1, fence: deposed.writer.fence });
    lateCreate.catch(() => undefined);
    await until(() => existsSync(HELD));

    const holder = await take(true);
    const mine = provider();
    const created = await mine.create({ cluster: CLUSTER, name: NAME, ordinal: 1, fence: holder.writer.fence });
    assert.equal(created.state, 'Provisioned');
    await mine.startMember(CLUSTER, NAME, launch(created.peerURL), holder.writer.fence);
    await until(async () => (await mine.components(CLUSTER, NAME).etcd.health()).healthy);
    const host = info.hosts[0]?.baseDir ?? '-';
    const member = join(host, 'clusters', CLUSTER, NAME);
    const pid = readFileSync(join(member, 'etcd.pid'), 'utf8');
    const running = await mine.describe(CLUSTER, NAME);

    writeFileSync(RELEASE, '');
    await assert.rejects(lateCreate, StaleFenceError);
    await assert.rejects(late.startMember(CLUSTER, NAME, { ...launch(created.peerURL), initialClusterState: 'existing' }, deposed.writer.fence), StaleFenceError);
    await assert.rejects(late.stopMember(CLUSTER, NAME, deposed.writer.fence), StaleFenceError);
    await assert.rejects(late.renewMemberCertificates(CLUSTER, NAME, deposed.writer.fence), StaleFenceError);
    await assert.rejects(late.delete(CLUSTER, NAME, deposed.writer.fence), StaleFenceError);

    const after = await mine.describe(CLUSTER, NAME);
    assert.equal(after?.state, 'Provisioned', `not marked Failed: ${after?.failureMessage ?? ''}`);
    assert.equal(after.failureMessage, undefined);
    assert.equal(after.memberRunning, true);
    assert.equal(after.memberStartedAt, running?.memberStartedAt, 'the same start of the member');
    assert.equal(readFileSync(join(member, 'etcd.pid'), 'utf8'), pid, 'the same process');
    assert.ok(existsSync(join(member, 'data', 'member')), 'its data dir is intact');
    assert.ok((await mine.components(CLUSTER, NAME).etcd.health()).healthy, 'the member answers healthy');

    await mine.stopMember(CLUSTER, NAME, holder.writer.fence);
    assert.equal((await mine.describe(CLUSTER, NAME))?.memberRunning, false, 'the holder itself may stop it');
    await mine.delete(CLUSTER, NAME, holder.writer.fence);
    assert.ok(!existsSync(member), 'and delete it');
  });
});

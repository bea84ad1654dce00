import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { defaultControlPlane } from '../../src/api/control-plane.ts';
import { Etcd3Admin } from '../../src/adapters/etcd/etcd3-admin.ts';
import { MemoryStateStore } from '../../src/adapters/stores/memory-state-store.ts';
import { execute } from '../../src/executor/execute.ts';
import { FencedWriter } from '../../src/lease/fenced-writer.ts';
import type { ObservedMember } from '../../src/planner/types.ts';
import { systemClock } from '../../src/ports/clock.ts';
import type { EtcdMemberStatus } from '../../src/ports/etcd-admin.ts';
import type { InfraProvider } from '../../src/ports/machine-provider.ts';
import { cliEnvFactory, pidsUnder, statusOf, type CliRun } from '../support/cli.ts';
import { waitFor } from '../support/controller-replica.ts';
import { adminFor, kvClientFor } from '../support/etcd-direct.ts';
import { observed } from '../support/observed.ts';
import { RelayedCluster } from '../support/peer-relay.ts';

// Membership changes on fresh ground, on real etcd 3.5: no removal while a learner that was added has
// not named itself (it boots against the membership it was given), and the executor's last re-check
// before a removal asks that the voters agree on one leader in one raft term, not only that each
// names some leader.
const VERSION = '3.5.36';
const newEnv = cliEnvFactory();
const admins: Etcd3Admin[] = [];
after(async () => {
  for (const admin of admins) await admin.close();
});

/** etcd server processes started under `dir`. */
function etcdPidsUnder(dir: string): number[] {
  return pidsUnder(dir).filter(isEtcd);
}

function isEtcd(pid: number): boolean {
  try {
    return basename(readFileSync(`/proc/${String(pid)}/cmdline`, 'utf8').split('\0')[0] ?? '') === 'etcd';
  } catch {
    return false;
  }
}

/**
 * The first etcd process started under `dir` after this call, found within a millisecond or two of
 * its start: only processes started since are read, so a joiner is caught long before it has
 * booted far enough to name itself.
 */
async function nextEtcdUnder(dir: string, deadlineMs: number, gaveUp: () => string | undefined): Promise<number> {
  const before = new Set(readdirSync('/proc'));
  // A new process is read again for a while: between fork and exec it still has its parent's command line.
  const firstSeen = new Map<string, number>();
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    for (const entry of readdirSync('/proc')) {
      if (before.has(entry) || !/^\d+$/.test(entry)) continue;
      const since = firstSeen.get(entry) ?? Date.now();
      firstSeen.set(entry, since);
      if (Date.now() - since > 2000) continue;
      let cmdline: string;
      try {
        cmdline = readFileSync(`/proc/${entry}/cmdline`, 'utf8');
      } catch {
        continue;
      }
      if (cmdline.includes(dir) && isEtcd(Number(entry))) return Number(entry);
    }
    const why = gaveUp();
    if (why !== undefined || Date.now() > deadline) assert.fail(`no joining member process: ${why ?? 'timed out'}`);
    await sleep(1);
  }
}

describe('no removal while an added learner has not named itself (local provider, real etcd)', { timeout: 300_000 }, () => {
  test('a joiner frozen before it names itself holds the remediation of a killed voter; once it boots, both go through', async () => {
    const env = newEnv('127.51');
    const manifest = env.writeManifest('ul', { replicas: 3, version: VERSION, remediation: { unhealthyAfter: '3s' } });
    const up = await env.run(['up', '-f', manifest, '--timeout', '90s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    const doc = statusOf(up.stdout);
    const admin = adminFor(doc.status);
    admins.push(admin);
    const voters = etcdPidsUnder(env.stateDir);
    assert.equal(voters.length, 3);

    let scaled: CliRun | undefined;
    // Watched from before the scale starts, so the joiner's process is caught at its start.
    const joinerStarted = nextEtcdUnder(env.stateDir, 60_000, () => (scaled === undefined ? undefined : `scale ended: ${scaled.stderr}`));
    const scaling = env.run(['scale', 'ul', '--replicas', '5', '--timeout', '150s', '-o', 'json']).then((run) => (scaled = run));
    // The joiner is frozen as soon as its process exists: it cannot name itself in the member list.
    const joiner = await joinerStarted;
    process.kill(joiner, 'SIGSTOP');
    let resumed = false;
    const resume = (): void => {
      if (!resumed) process.kill(joiner, 'SIGCONT');
      resumed = true;
    };
    try {
      const listed = await admin.memberList(doc.status.endpoints);
      const unnamed = listed.filter((m) => m.isLearner && m.name === '');
      assert.equal(unnamed.length, 1, `one learner added and not named: ${JSON.stringify(listed.map((m) => [m.name, m.isLearner]))}`);

      // A follower voter dies: past unhealthyAfter its machine is remediated, which removes its member.
      const victim = doc.status.machines.find((m) => m.phase === 'Voter' && m.name !== doc.status.leader);
      assert.ok(victim?.clientURL);
      const victimId = listed.find((m) => m.clientURLs.includes(victim.clientURL ?? ''))?.id;
      assert.ok(victimId);
      for (const pid of voters) if (readFileSync(`/proc/${String(pid)}/cmdline`, 'utf8').includes(victim.clientURL)) process.kill(pid, 'SIGKILL');

      // Well past unhealthyAfter, the killed voter is still a member: its removal waits for the joiner.
      // The member list is read every 200 ms; `status` (a CLI start, slower) alongside it.
      const holdUntil = Date.now() + 10_000;
      let removedWhileFrozen = false;
      let waitSeen = false;
      let lastWaits: string[] = [];
      await Promise.all([
        (async () => {
          while (Date.now() < holdUntil) {
            const members = await admin.memberList(doc.status.endpoints);
            removedWhileFrozen ||= !members.some((m) => m.id === victimId);
            await sleep(200);
          }
        })(),
        (async () => {
          while (Date.now() < holdUntil) {
            const status = await env.run(['status', 'ul', '-o', 'json']);
            if (status.code === 0) {
              lastWaits = statusOf(status.stdout).status.waits.map((w) => `${w.code}: ${w.message}`);
              waitSeen ||= lastWaits.some((w) => w.startsWith('LearnerNotStarted') && w.includes(`not removing ${victim.name}`));
            }
            await sleep(200);
          }
        })(),
      ]);
      assert.ok(!removedWhileFrozen, `${victim.name} was removed while the learner had not named itself:\n${(await env.run(['events', 'ul'])).stdout}`);
      assert.ok(waitSeen, `status says the removal waits for the learner (LearnerNotStarted); last waits: ${lastWaits.join('; ')}`);
      const resumedAt = Date.now();
      resume();

      const run = await scaling;
      assert.equal(run.code, 0, run.stderr.slice(-3000));
      const done = statusOf(run.stdout);
      assert.equal(done.status.voters, 5);
      assert.ok(!done.status.machines.some((m) => m.name === victim.name), `${victim.name} replaced`);
      const events = JSON.parse((await env.run(['events', 'ul', '-o', 'json'])).stdout) as { action: string | null; machine: string | null; startedAt: string; result: string }[];
      const removal = events.find((e) => e.action === 'RemoveMember' && e.machine === victim.name && e.result === 'ok');
      assert.ok(removal && Date.parse(removal.startedAt) >= resumedAt, `${victim.name}'s removal came after the learner booted: ${JSON.stringify(removal)}`);

      // The frozen joiner booted against the membership it was given and stayed: never "member count is unequal".
      const joinerMachine = env.machines('ul').find((m) => m.clientURL !== undefined && readFileSync(`/proc/${String(joiner)}/cmdline`, 'utf8').includes(m.clientURL));
      assert.ok(joinerMachine, 'the joiner is still running, on its machine');
      const log = join(env.stateDir, 'clusters', 'ul', 'machines', joinerMachine.name, 'etcd.log');
      assert.ok(!existsSync(log) || !readFileSync(log, 'utf8').includes('member count is unequal'), 'the joiner never failed its boot check');
    } finally {
      resume();
      await scaling;
      await env.run(['down', 'ul', '--force', '--wait', '1s']);
    }
  });
});

describe('the last re-check before a removal: one leader in one term (real etcd, a member cut off)', { timeout: 120_000 }, () => {
  test('a voter cut off across a leader transfer still names the old leader in the old term: the removal is held and the cluster keeps quorum', async () => {
    // fg-3 hears nothing from its peers once cut off; its long election timeout keeps it a follower of
    // the old leader meanwhile, as a member frozen or partitioned for less than one timeout would be.
    const cluster = new RelayedCluster('127.52', ['fg-1', 'fg-2', 'fg-3'], VERSION, { 'fg-3': ['--election-timeout', '30000'] });
    const admin = new Etcd3Admin({ callTimeoutMs: 2000 });
    admins.push(admin);
    try {
      await cluster.start();
      const endpoints = cluster.members.map((m) => m.clientURL);
      const urlOf = (name: string): string => cluster.members.find((m) => m.name === name)?.clientURL ?? '';
      const statuses = async (): Promise<EtcdMemberStatus[]> => Promise.all(endpoints.map((url) => admin.status(url)));
      const agreed = async (): Promise<EtcdMemberStatus[] | undefined> => {
        const all = await statuses().catch(() => undefined);
        const [first] = all ?? [];
        return all !== undefined && first !== undefined && first.leaderId !== '0' && all.every((s) => s.leaderId === first.leaderId && s.raftTerm === first.raftTerm) ? all : undefined;
      };
      let before = await waitFor('three members that agree on a leader', agreed, 30_000);
      const members = await admin.memberList(endpoints);
      const idOf = (name: string): string => members.find((m) => m.name === name)?.id ?? '';
      cluster.learnIds(new Map(members.map((m) => [m.name, m.id])));
      if (before[0]?.leaderId === idOf('fg-3')) {
        await admin.moveLeader(urlOf('fg-3'), idOf('fg-1'));
        before = await waitFor('a leader other than fg-3', async () => ((await agreed())?.[0]?.leaderId === idOf('fg-1') ? agreed() : undefined), 30_000);
      }
      const oldLeaderId = before[0]?.leaderId ?? '';
      const oldTerm = before[0]?.raftTerm ?? 0;
      const oldLeader = members.find((m) => m.id === oldLeaderId);
      const newLeader = members.find((m) => m.id !== oldLeaderId && m.name !== 'fg-3');
      assert.ok(oldLeader && newLeader);
      // What the pass observed: every voter answering, all naming the old leader in the old term.
      const seen = observed({ members: members.map((m): ObservedMember => ({ ...m, status: { ok: true, status: before.find((s) => s.memberId === m.id) ?? before[0]! } })) });

      cluster.cutOff('fg-3');
      await admin.moveLeader(urlOf(oldLeader.name), newLeader.id);
      await waitFor('the leader transfer', async () => {
        const answers = await Promise.all([admin.status(urlOf(oldLeader.name)), admin.status(urlOf(newLeader.name))]).catch(() => undefined);
        if (answers === undefined) return undefined;
        const [a, b] = answers;
        return a.leaderId === newLeader.id && b.leaderId === newLeader.id && a.raftTerm > oldTerm && a.raftTerm === b.raftTerm ? true : undefined;
      }, 30_000);
      const stale = await admin.status(urlOf('fg-3'));
      assert.equal(stale.leaderId, oldLeaderId, 'the cut-off voter still names the old leader');
      assert.equal(stale.raftTerm, oldTerm, 'in the old term');

      // The removal planned on the pass's readings: the old leader, now a follower. The voters left
      // (the new leader and the cut-off one) both name a leader, but not the same one in one term: the
      // cut-off voter cannot vote, so removing the old leader would leave one reachable voter of two.
      const store = new MemoryStateStore({ isHolderAlive: () => true });
      await store.applySpec(defaultControlPlane('fg'), Date.now());
      const token = 'fresh-ground';
      assert.ok(await store.acquireLease('fg', { token, holder: 'test', host: 'test', pid: process.pid, ttlMs: 60_000 }, Date.now()));
      const writer = new FencedWriter(store, { cluster: 'fg', token }, { clock: systemClock, ttlMs: 60_000, marginMs: 1000, callBoundMs: 3000, renewedAt: Date.now() });
      const deps = { cluster: 'fg', etcd: admin, provider: {} as InfraProvider, store, writer, clock: systemClock, failpoint: () => undefined };
      await execute(deps, seen, {
        machineActions: [],
        membershipAction: { kind: 'RemoveMember', memberId: oldLeader.id, peerURL: oldLeader.peerURLs[0] ?? '', reason: 'ScaleDown' },
        waits: [],
        conditions: [],
        requeueAfterMs: 0,
        converged: false,
        phases: {},
      });
      const event = (await store.listEvents('fg')).find((e) => e.action === 'RemoveMember');
      assert.equal(event?.outcome, 'Refused', JSON.stringify(event));
      assert.match(event.message, /removal held: the voters do not agree on a leader and term right now/);
      assert.ok((await admin.memberList([urlOf(newLeader.name)])).some((m) => m.id === oldLeader.id), 'the old leader is still a member');
      const kv = kvClientFor({ endpoints: [urlOf(newLeader.name)] });
      try {
        await kv.put('/fresh-ground').value('still-writable');
      } finally {
        kv.close();
      }
    } finally {
      await cluster.stop();
    }
  });
});

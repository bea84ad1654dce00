import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { membershipAgreesStep, voterBackStep } from '../../src/care/rolling.ts';
import { runSteps } from '../../src/care/steps.ts';
import type { Clock } from '../../src/ports/clock.ts';
import { EtcdAdminError, type EtcdAdmin } from '../../src/ports/etcd-admin.ts';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { cliEnvFactory, pidsUnder, statusOf } from '../support/cli.ts';
import { adminFor, askEtcd } from '../support/etcd-direct.ts';

// A member restarted in place rebuilds its membership from its own data dir, with the learner limit it
// is started with now (docs/etcd-behaviour.md, "A restart and the learner limit"). On real etcd 3.6:
// the check care runs after each restart passes when the members agree and stops the job when they do
// not, and a lower limit at the restart either keeps the members agreeing or keeps the member down.
const newEnv = cliEnvFactory();
const env = newEnv('127.37');
const admins: EtcdAdmin[] = [];
const clock: Clock = { now: () => Date.now(), sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)) };
after(async () => {
  for (const admin of admins) await admin.close();
});

function manifest(maxLearners: number): string {
  return env.writeManifest('lim', { replicas: 3, version: '3.6.17', etcd: { maxLearners } });
}

/** The command line of the member process named `name`, and its PID. */
function memberProcess(name: string): { pid: number; args: string[] } {
  for (const pid of pidsUnder(env.stateDir)) {
    const args = readFileSync(`/proc/${String(pid)}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
    if (args[args.indexOf('--name') + 1] === name) return { pid, args };
  }
  throw new Error(`no process of member ${name}`);
}

async function exited(pid: number): Promise<void> {
  while (pidsUnder(env.stateDir).includes(pid)) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Runs etcd with `args` until it exits by itself; its output and exit code. */
function runUntilExit(args: string[]): Promise<{ code: number | null; output: string }> {
  const [binary = '', ...rest] = args;
  const child = spawn(binary, rest, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  // A member that did start after all is stopped by its PID, and the test sees it did not exit by itself.
  const stop = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) => {
    child.on('close', (code) => {
      clearTimeout(stop);
      resolve({ code, output });
    });
  });
}

/** The errors the members of `lim` logged, for a failure's message. */
function errorsLogged(): string {
  return env
    .machines('lim')
    .map((m) => {
      const file = join(env.stateDir, 'clusters', 'lim', 'machines', m.name, 'etcd.log');
      const lines = existsSync(file) ? readFileSync(file, 'utf8').split('\n') : [];
      return `${m.name}: ${lines.filter((l) => /"level":"(error|fatal|panic)"/.test(l)).slice(-3).join('\n')}`;
    })
    .join('\n');
}

/** Adds an unstarted learner once etcd's 5 s rule lets it (the members were just restarted). */
async function addLearner(admin: EtcdAdmin, peerURL: string): Promise<void> {
  for (;;) {
    try {
      await admin.addLearner(env.machines('lim').flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL])), peerURL);
      return;
    } catch (error) {
      if (!(error instanceof EtcdAdminError) || error.kind !== 'UnhealthyCluster') throw error;
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  }
}

/** An admin whose member list asked of `endpoint` alone leaves out member `dropped`: a member that lost one. */
function doctored(real: EtcdAdmin, endpoint: string, dropped: string): EtcdAdmin {
  return new Proxy(real, {
    get(target, prop) {
      if (prop === 'memberList') {
        return async (endpoints: readonly string[], options?: { linearizable: boolean }) => {
          const list = await target.memberList(endpoints, options);
          return endpoints.length === 1 && endpoints[0] === endpoint ? list.filter((m) => m.id !== dropped) : list;
        };
      }
      const value: unknown = Reflect.get(target, prop);
      return typeof value === 'function' ? (value as (...a: unknown[]) => unknown).bind(target) : value;
    },
  });
}

describe('membership after a restart in place, etcd 3.6.17', { timeout: 400_000 }, () => {
  let doc: ControlPlaneStatusDocument;

  test('a restarted member that lists the leader\'s members passes; one whose list lacks a member stops the job with MembershipDiverged', async () => {
    const up = await env.run(['up', '-f', manifest(3), '--timeout', '120s', '-o', 'json']);
    assert.equal(up.code, 0, up.stderr);
    doc = statusOf(up.stdout);
    const renewed = await env.run(['certs', 'renew', 'lim']);
    assert.equal(renewed.code, 0, renewed.stderr);

    const admin = adminFor(doc.status);
    admins.push(admin);
    const { members, statuses } = await askEtcd(doc.status);
    const leaderId = statuses[0]?.leaderId ?? '';
    const [follower, other] = members.filter((m) => m.id !== leaderId);
    assert.ok(follower && other);
    const back = await voterBackStep(admin, doc.status.endpoints, follower.id)();
    assert.equal(back.kind, 'Done', JSON.stringify(back));

    const lost = doctored(admin, follower.clientURLs[0] ?? '', other.id);
    const diverged = await voterBackStep(lost, doc.status.endpoints, follower.id)();
    assert.deepEqual([diverged.kind, 'reason' in diverged ? diverged.reason : ''], ['Error', 'MembershipDiverged'], JSON.stringify(diverged));
    const recovered = await membershipAgreesStep(lost, doc.status.endpoints, [follower.id])();
    assert.deepEqual([recovered.kind, 'reason' in recovered ? recovered.reason : ''], ['Error', 'MembershipDiverged']);
  });

  test('two learners listed above a restart\'s limit of 1: the care job does not restart anyone, and etcd refuses to start the member with that limit', async () => {
    const admin = adminFor(doc.status);
    admins.push(admin);
    for (const host of ['127.37.9.1', '127.37.9.2']) await addLearner(admin, `https://${host}:2380`);
    const renewal = await env.run(['certs', 'renew', 'lim']);
    assert.equal(renewal.code, 3, renewal.stderr);
    assert.match(renewal.stderr, /learner .* is joining/);

    const { members, statuses } = await askEtcd(doc.status);
    const follower = members.find((m) => !m.isLearner && m.id !== statuses[0]?.leaderId);
    assert.ok(follower);
    const { pid, args } = memberProcess(follower.name);
    process.kill(pid, 'SIGTERM');
    await exited(pid);
    const limit = args.indexOf('--max-learners');
    assert.equal(args[limit + 1], '3');
    const lower = await runUntilExit(args.map((a, i) => (i === limit + 1 ? '1' : a)));
    assert.notEqual(lower.code, 0, 'etcd does not serve with more learners listed than its limit');
    assert.match(lower.output, /too many learner members/);

    // fastplane repairs it (the unstarted learners, which have no machine, are removed as orphans); every voter agrees with the leader.
    const repaired = await env.run(['up', '-f', manifest(3), '--timeout', '120s', '-o', 'json']);
    assert.equal(repaired.code, 0, repaired.stderr);
    const voters = (await askEtcd(statusOf(repaired.stdout).status)).members.filter((m) => !m.isLearner);
    await runSteps(membershipAgreesStep(admin, doc.status.endpoints, voters.map((m) => m.id)), clock, 60_000);
    assert.deepEqual((await admin.memberList(doc.status.endpoints)).filter((m) => m.isLearner), []);
  });

  test('learner adds applied under a limit of 3 and still in the log: etcd started with 1 on that data dir refuses the replayed add and fails; a care restart keeps 3 and every member lists the leader\'s members', async () => {
    // The previous test added two learners and removed them: fewer entries since than --snapshot-count,
    // so a restart applies those changes again.
    const admin = adminFor(doc.status);
    admins.push(admin);
    const { members, statuses } = await askEtcd(doc.status);
    // The oldest follower: its log holds every learner add since the cluster started.
    const [follower] = members.filter((m) => !m.isLearner && m.id !== statuses[0]?.leaderId).sort((a, b) => a.name.localeCompare(b.name, 'en', { numeric: true }));
    assert.ok(follower);
    const { pid, args } = memberProcess(follower.name);
    process.kill(pid, 'SIGTERM');
    await exited(pid);
    const limit = args.indexOf('--max-learners');
    const lower = await runUntilExit(args.map((a, i) => (i === limit + 1 ? '1' : a)));
    assert.notEqual(lower.code, 0, 'the member does not come back');
    assert.match(lower.output, /Validation on configuration change failed.*"shouldApplyV3":false.*too many learner members/);
    const repaired = await env.run(['up', '-f', manifest(3), '--timeout', '120s', '-o', 'json']);
    assert.equal(repaired.code, 0, repaired.stderr);

    // The spec's lower limit is stored; the process stops as the rollout records its first machine, so
    // the renewal restarts the members in place while the spec says 1.
    const lowered = await env.run(['up', '-f', manifest(1), '--timeout', '60s'], { FASTPLANE_FAILPOINTS: 'after-create-record' });
    assert.equal(lowered.signal, 'SIGKILL', lowered.stderr);
    const renewed = await env.run(['certs', 'renew', 'lim']);
    assert.equal(renewed.code, 0, `${renewed.stderr}\n${errorsLogged()}`);
    const running = env.machines('lim').filter((m) => m.memberId !== undefined);
    assert.deepEqual(running.map((m) => m.maxLearners), [3, 3, 3], 'each restart kept, and recorded, the limit its member ran');
    for (const m of running) assert.equal(memberProcess(m.name).args[memberProcess(m.name).args.indexOf('--max-learners') + 1], '3');
    const now = await askEtcd(statusOf(repaired.stdout).status);
    for (const m of now.members) {
      const own = await admin.memberList([m.clientURLs[0] ?? ''], { linearizable: false });
      assert.deepEqual(own.map((x) => x.id).sort(), now.members.map((x) => x.id).sort(), `${m.name} lists every member`);
    }
    assert.equal((await env.run(['down', 'lim'])).code, 0);
  });
});

import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { learnerLimitOf, pidsUnder, statusOf } from '../support/cli.ts';
import { ClusterWatch } from '../support/cluster-watch.ts';
import { adminFor, askEtcd, kvClientFor } from '../support/etcd-direct.ts';
import { converged, waitFor, type ChaosScenario, type ReconfigurationMode } from './scenario-run.ts';

const FAST_REMEDIATION = { unhealthyAfter: '3s', learnerStuckAfter: '30s' };

export const SCENARIOS: ChaosScenario[] = [
  {
    name: 'kill the leader during a promotion',
    addressPrefix: '127.110',
    spec: { replicas: 3, remediation: FAST_REMEDIATION },
    converges: true,
    expectation: 'the dead leader is replaced and the scale-up finishes',
    async act(s) {
      const scale = s.background(['scale', s.cluster, '--replicas', '5']);
      const leader = await s.leader();
      // The first learner appears within a second of the scale-up; kill the leader as it is promoted.
      await s.learnerListed();
      s.kill(leader);
      const run = await scale.done;
      return { run, expectationMet: s.deleted(leader) };
    },
  },
  {
    name: 'kill a learner mid-catch-up',
    addressPrefix: '127.111',
    spec: { replicas: 1, remediation: FAST_REMEDIATION },
    converges: true,
    expectation: 'the one learner started before the crash, once killed, is marked failed (LearnerExited), its member removed and its machine replaced: 3 voters, no learner',
    async act(s) {
      const crashed = await s.fastplane(['scale', s.cluster, '--replicas', '3'], { FASTPLANE_FAILPOINTS: 'after-start-member' });
      if (crashed.signal !== 'SIGKILL') throw new Error('the failpoint after-start-member was not reached');
      const joined = s.env.machines(s.cluster).filter((m) => m.role === 'join');
      const learner = joined[0]?.name ?? '';
      const runningBeforeKill = pidsUnder(s.machineDir(learner)).length;
      s.kill(learner);
      const run = await s.fastplane(['up', '--name', s.cluster]);
      const events = s.env.events(s.cluster);
      const exited = events.some((e) => e.action === 'MarkMachineFailed' && e.machine === learner && e.message.includes('LearnerExited'));
      const removed = events.some((e) => e.action === 'RemoveMember' && e.machine === learner && e.outcome === 'Succeeded');
      const members = converged(run) ? (await askEtcd(statusOf(run.stdout).status)).members : [];
      const settled = members.length === 3 && members.every((m) => !m.isLearner);
      return { run, expectationMet: joined.length === 1 && runningBeforeKill === 1 && exited && removed && s.deleted(learner) && settled };
    },
  },
  {
    name: 'kill the init machine right after init while the others provision',
    addressPrefix: '127.112',
    converges: true,
    expectation: 'the init member restarts from its data with every acknowledged write; never initialized twice',
    async act(s) {
      const file = s.env.writeManifest('chaos', s.withMode({ replicas: 3, provider: { provisioningDelay: '1s-6s' } }));
      const up = s.background(['up', '-f', file]);
      const init = await waitFor('the init member', () => {
        const m = s.env.machines(s.cluster).find((r) => r.role === 'init');
        return m && pidsUnder(s.machineDir(m.name)).length > 0 ? m.name : undefined;
      });
      const doc = await waitFor('the init member to serve', async () => {
        const d = await s.status();
        return d.status.endpoints.length > 0 ? d : undefined;
      });
      s.startWriter(doc.status);
      await waitFor('acknowledged writes', () => ((s.writer?.acknowledged ?? 0) > 5 ? true : undefined));
      s.kill(init);
      const run = await up.done;
      const inits = s.env.events(s.cluster).filter((e) => e.action === 'InitCluster' && e.outcome === 'Succeeded').length;
      return { run, expectationMet: inits === 1 && s.machineNames().includes(init) };
    },
  },
  {
    name: 'provisioning failure',
    addressPrefix: '127.113',
    spec: { replicas: 1, provider: { provisioningDelay: '3s' } },
    converges: true,
    expectation: 'the failed machine is replaced at once',
    async act(s) {
      const scale = s.background(['scale', s.cluster, '--replicas', '3']);
      const victim = await waitFor('a provisioning machine', () => s.machineNames().find((n) => n !== 'chaos-1' && existsSync(s.machineDir(n))));
      // The local provider reports a machine whose folder holds this file as failed, like a cloud API would.
      writeFileSync(join(s.machineDir(victim), 'provisioning-failed'), 'simulated: no capacity in the zone');
      const run = await scale.done;
      const failed = s.env.events(s.cluster).some((e) => e.action === 'MarkMachineFailed' && e.machine === victim && e.message.includes('ProvisioningFailed'));
      return { run, expectationMet: failed && s.deleted(victim) };
    },
  },
  {
    name: 'a member that never starts',
    addressPrefix: '127.114',
    spec: { replicas: 1, provider: { provisioningDelay: '3s' }, remediation: FAST_REMEDIATION },
    converges: true,
    expectation: 'the member that cannot start is removed and its machine replaced',
    async act(s) {
      const scale = s.background(['scale', s.cluster, '--replicas', '3']);
      const victim = await waitFor('a provisioning machine', () => s.machineNames().find((n) => n !== 'chaos-1' && existsSync(join(s.machineDir(n), 'machine.json'))));
      const { address } = JSON.parse(readFileSync(join(s.machineDir(victim), 'machine.json'), 'utf8')) as { address: string };
      // Someone else holds the member's client port: etcd exits at start.
      const blocker: Server = createServer();
      await new Promise<void>((resolve) => blocker.listen(2379, address, resolve));
      try {
        const run = await scale.done;
        return { run, expectationMet: s.deleted(victim) };
      } finally {
        blocker.close();
      }
    },
  },
  {
    name: 'etcd NOSPACE alarm on the cluster',
    addressPrefix: '127.115',
    // Three voters from the start: a learner joining after the recovery would replay the history
    // that filled the quota (it is in the raft log, compaction does not shorten that) and raise the
    // alarm again on itself.
    spec: { replicas: 3, etcd: { quotaBackendBytes: 16 * 1024 * 1024 } },
    converges: true,
    expectation: 'the reconcile loop recovers on its own (compact, defragment every member with the leader last, disarm, reasons in status and events)',
    async act(s) {
      // History fills the quota (one key rewritten): what compaction and defragmentation can free.
      const kv = kvClientFor(s.access);
      const big = 'x'.repeat(256 * 1024);
      try {
        for (let i = 0; i < 200; i++) await kv.put('/fill').value(big);
      } catch {
        // NOSPACE: the quota is full, which is the point.
      } finally {
        kv.close();
      }
      const raised = (await s.status()).status.waits.some((w) => w.code === 'NoSpaceAlarm' && w.message.includes('compact all history, defragment every member'));
      const run = await s.fastplane(['up', '--name', s.cluster]);
      const recovered = s.env.events(s.cluster).find((e) => e.action === 'RecoverNoSpace' && e.outcome === 'Succeeded');
      const admin = adminFor(s.access);
      try {
        const members = await admin.memberList(s.access.endpoints);
        const alarms = await admin.alarms(s.access.endpoints);
        const said = recovered?.message.includes('NOSPACE alarm: compacted all history') === true && recovered.message.includes('disarmed the NOSPACE alarm');
        return { run, expectationMet: raised && said && alarms.length === 0 && members.filter((m) => !m.isLearner).length === 3 };
      } finally {
        await admin.close();
      }
    },
  },
  {
    name: 'two voters killed in a five-member cluster',
    addressPrefix: '127.116',
    spec: { replicas: 5, remediation: FAST_REMEDIATION },
    converges: true,
    expectation: 'both are replaced, one membership change at a time',
    async act(s) {
      const leader = await s.leader();
      const victims = s.machineNames().filter((n) => n !== leader).slice(0, 2);
      for (const v of victims) s.kill(v);
      const run = await s.fastplane(['up', '--name', s.cluster]);
      return { run, expectationMet: victims.every((v) => s.deleted(v)) };
    },
  },
  {
    name: 'SIGKILL of fastplane mid-rollout',
    addressPrefix: '127.117',
    spec: { replicas: 3, version: '3.4.23' },
    converges: true,
    expectation: 'the next run finishes the rollout: every member at 3.5.16',
    async act(s) {
      const rollout = s.background(['rollout', s.cluster, '--version', '3.5.16']);
      await waitFor('the first upgraded voter', () => (s.env.machines(s.cluster).some((m) => m.version === '3.5.16' && m.phase === 'Voter') ? true : undefined));
      rollout.child.kill('SIGKILL');
      await rollout.done;
      const run = await s.fastplane(['up', '--name', s.cluster]);
      const doc = converged(run) ? (JSON.parse(run.stdout) as ControlPlaneStatusDocument) : undefined;
      return { run, expectationMet: doc?.status.machines.every((m) => m.version === '3.5.16') === true };
    },
  },
  {
    name: 'a removal answered with "server stopped"',
    addressPrefix: '127.118',
    spec: { replicas: 3 },
    converges: true,
    expectation: 'the removal is confirmed with a member list, not retried',
    async act(s) {
      const run = await s.fastplane(['scale', s.cluster, '--replicas', '1'], { FASTPLANE_INJECT_FAULTS: 'remove-answers-server-stopped' });
      const removals = s.env.events(s.cluster).filter((e) => e.action === 'RemoveMember');
      const done = removals.filter((e) => e.outcome === 'Succeeded').length;
      const misread = removals.some((e) => e.outcome === 'Failed' && e.message.includes('server stopped'));
      return { run, expectationMet: done === 2 && !misread };
    },
  },
  {
    name: 'scale down with a dead leader',
    addressPrefix: '127.119',
    spec: { replicas: 5, remediation: FAST_REMEDIATION },
    converges: true,
    expectation: 'the dead leader is the first victim; a new leader is elected and quorum holds',
    async act(s) {
      const leader = await s.leader();
      s.kill(leader);
      const run = await s.fastplane(['scale', s.cluster, '--replicas', '3']);
      return { run, expectationMet: s.deleted(leader) };
    },
  },
  {
    name: 'a voter frozen (SIGSTOP) during a scale-up',
    addressPrefix: '127.120',
    spec: { replicas: 3, remediation: FAST_REMEDIATION },
    converges: true,
    expectation: 'the join gate holds while the voter is frozen; the frozen voter is remediated',
    async act(s) {
      const leader = await s.leader();
      const frozen = s.machineNames().find((n) => n !== leader) ?? '';
      s.kill(frozen, 'SIGSTOP');
      const scale = s.background(['scale', s.cluster, '--replicas', '5']);
      // Frozen until fastplane has seen it unhealthy for longer than unhealthyAfter (3 s) and marked it failed.
      const markedFailed = (): true | undefined => (s.env.events(s.cluster).some((e) => e.action === 'MarkMachineFailed' && e.machine === frozen) ? true : undefined);
      const held = await waitFor('fastplane to mark the frozen voter failed', markedFailed).catch(() => false);
      s.kill(frozen, 'SIGCONT');
      const run = await scale.done;
      return { run, expectationMet: held && s.deleted(frozen) };
    },
  },
  voterKilledDuringRollout('3.4.23', '3.5.16', '127.121'),
  voterKilledDuringRollout('3.6.17', '3.7.4', '127.122'),
  // Crosses the learner limit's change: 3.5 members run 1, the 3.6 ones replacing them 8 (auto).
  voterKilledDuringRollout('3.5.36', '3.6.17', '127.132'),
  {
    name: 'kill the leader while three learners catch up',
    addressPrefix: '127.131',
    spec: { replicas: 3, version: '3.6.17', remediation: FAST_REMEDIATION },
    converges: true,
    expectation: 'the dead leader is replaced, the scale-up to 7 finishes, and etcd never lists more learners than the members run',
    async act(s) {
      // 8 MB first, so each learner's catch-up takes long enough for several to overlap.
      const kv = kvClientFor(s.access);
      const value = 'p'.repeat(4096);
      try {
        for (let i = 0; i < 2_000; i += 100) await Promise.all(Array.from({ length: 100 }, (_, j) => kv.put(`/preload/${String(i + j)}`).value(value)));
      } finally {
        kv.close();
      }
      const watch = new ClusterWatch(s.access);
      watch.start();
      try {
        const scale = s.background(['scale', s.cluster, '--replicas', '7']);
        const leader = await s.leader();
        // On loopback an 8 MB catch-up takes well under a second, so each learner is frozen once it is
        // named (the join gate's condition for the next add) and thawed after the kill: three learners
        // are then still catching up when the leader dies.
        const frozen = await s.namedLearners(3, (name) => {
          s.kill(name, 'SIGSTOP');
        });
        s.kill(leader);
        for (const learner of frozen) s.kill(learner, 'SIGCONT');
        const run = await scale.done;
        const limit = learnerLimitOf(s.env.machines(s.cluster));
        const most = Math.max(...watch.samples.map((x) => x.learners));
        return { run, expectationMet: s.deleted(leader) && most >= 3 && most <= limit };
      } finally {
        await watch.stop();
      }
    },
  },
];

/**
 * The scenarios the test suite also runs in guarded mode (`reconfigurationCheck: fastplane`), where the
 * mode matters most: a promotion and the adds after it with the leader killed, removals of dead voters
 * with quorum at its margin, and the join gate held by a frozen voter. `npm run chaos` runs every
 * scenario in both modes; the suite keeps the rest to etcd mode for its time budget.
 */
export const GUARDED_IN_SUITE: ReadonlySet<string> = new Set(['kill the leader during a promotion', 'two voters killed in a five-member cluster', 'a voter frozen (SIGSTOP) during a scale-up']);

/**
 * The scenarios above run on the default version (etcd 3.6); these run once more on 3.4.23, the
 * oldest supported (`npm run chaos` runs them too): a leader lost mid-promotion and two voters lost.
 */
export const OLDER_VERSION_SCENARIOS: ChaosScenario[] = [
  onVersion('kill the leader during a promotion', '3.4.23', '127.123'),
  onVersion('two voters killed in a five-member cluster', '3.4.23', '127.124'),
];

/**
 * The suite's chaos files and what each runs. A scenario's guarded run stays in the file of its etcd
 * run (the two share a loopback range, so they must not run at once); the rest of SCENARIOS is dealt
 * alternately to two files, which keeps the three near the same length.
 */
export type ChaosFile = 'etcd-checks-1' | 'etcd-checks-2' | 'guarded-and-oldest';

export function suiteRuns(file: ChaosFile): [ChaosScenario, ReconfigurationMode][] {
  if (file === 'guarded-and-oldest') {
    const guarded = SCENARIOS.filter((s) => GUARDED_IN_SUITE.has(s.name));
    return [...guarded.map((s): [ChaosScenario, ReconfigurationMode] => [s, 'etcd']), ...guarded.map((s): [ChaosScenario, ReconfigurationMode] => [s, 'fastplane']), ...OLDER_VERSION_SCENARIOS.map((s): [ChaosScenario, ReconfigurationMode] => [s, 'etcd'])];
  }
  const rest = SCENARIOS.filter((s) => !GUARDED_IN_SUITE.has(s.name));
  return rest.filter((_, i) => i % 2 === (file === 'etcd-checks-1' ? 0 : 1)).map((s) => [s, 'etcd']);
}

/** A scenario of SCENARIOS on another etcd version, on its own loopback range. */
function onVersion(name: string, version: string, addressPrefix: string): ChaosScenario {
  const scenario = SCENARIOS.find((candidate) => candidate.name === name);
  if (!scenario?.spec) throw new Error(`no scenario with a spec named ${name}`);
  return { ...scenario, name: `${name} (etcd ${version})`, addressPrefix, spec: { ...scenario.spec, version } };
}

/** A rollout from one version to the next with a non-leader voter of the old version killed midway. */
function voterKilledDuringRollout(from: string, to: string, addressPrefix: string): ChaosScenario {
  return {
    name: `kill a voter during a rollout ${from} → ${to}`,
    addressPrefix,
    spec: { replicas: 3, version: from, remediation: FAST_REMEDIATION },
    converges: true,
    expectation: `the dead voter is remediated and the rollout completes: every member at ${to}`,
    async act(s) {
      const rollout = s.background(['rollout', s.cluster, '--version', to]);
      await waitFor('the first upgraded voter', () => (s.env.machines(s.cluster).some((m) => m.version === to && m.phase === 'Voter') ? true : undefined));
      const leader = await s.leader();
      const victim = s.env.machines(s.cluster).find((m) => m.version === from && m.name !== leader && m.phase === 'Voter')?.name;
      if (victim !== undefined) s.kill(victim);
      const run = await rollout.done;
      const doc = converged(run) ? (JSON.parse(run.stdout) as ControlPlaneStatusDocument) : undefined;
      return { run, expectationMet: victim !== undefined && doc?.status.machines.every((m) => m.version === to) === true };
    },
  };
}

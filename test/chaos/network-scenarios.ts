import type { ChaosScenario, ScenarioRun } from './scenario-run.ts';
import { waitFor } from './scenario-run.ts';
import { learnerLimitOf, MEMBERSHIP_ACTIONS, statusOf, type CliRun } from '../support/cli.ts';
import { ClusterWatch } from '../support/cluster-watch.ts';
import { kvClientFor } from '../support/etcd-direct.ts';
import type { LabInfo, NetLab } from '../support/netlab.ts';

// Network faults on the lab (scripts/netlab.sh): members are hosts in their own network namespaces,
// reached by the ssh provider, and faults are nftables rules (and tbf rate limits) inside those
// namespaces. Every scenario heals the network before fastplane's last run is judged.

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function labOf(s: ScenarioRun): { lab: NetLab; info: LabInfo } {
  if (!s.lab) throw new Error('this scenario needs its lab');
  return s.lab;
}

/** The lab host (1-based) at an address, or in a URL. */
function hostAt(s: ScenarioRun, addressOrURL: string): number {
  const host = labOf(s).info.hosts.find((h) => addressOrURL === h.address || addressOrURL.includes(`//${h.address}:`));
  if (!host) throw new Error(`${addressOrURL} is not a lab host`);
  return host.index;
}

function hostOfMachine(s: ScenarioRun, name: string): number {
  const address = s.env.machines(s.cluster).find((m) => m.name === name)?.address;
  if (address === undefined) throw new Error(`machine ${name} has no address on record`);
  return hostAt(s, address);
}

/** Every lab host but these. */
function everyHostBut(s: ScenarioRun, ...excluded: number[]): number[] {
  return labOf(s)
    .info.hosts.map((h) => h.index)
    .filter((i) => !excluded.includes(i));
}

/** Membership changes that succeeded between two moments; a call already on its way may end just after the first. */
function membershipChangesBetween(s: ScenarioRun, from: number, to: number): number {
  return s.env.events(s.cluster).filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action) && e.outcome === 'Succeeded' && e.at > from + 2_000 && e.at < to).length;
}

function votersOf(run: CliRun): number {
  return run.code === 0 ? statusOf(run.stdout).status.machines.filter((m) => m.phase === 'Voter').length : 0;
}

function scaleTo(s: ScenarioRun, replicas: number): ReturnType<ScenarioRun['env']['start']> {
  return s.env.start(['scale', s.cluster, '--replicas', String(replicas), '--timeout', '3m', '-o', 'json']);
}

export const NETWORK_SCENARIOS: ChaosScenario[] = [
  {
    name: 'fastplane cut off from every member for 30 s mid-scale (network lab)',
    addressPrefix: '127.163',
    lab: { number: 63, hosts: 6 },
    spec: { replicas: 3 },
    converges: true,
    expectation: 'no membership change while cut off, no machine given up (those provisioning wait), waits with a reason, finishes after the heal',
    async act(s) {
      const { lab } = labOf(s);
      const scale = scaleTo(s, 5);
      await waitFor('the scale-up to create a machine', () => (s.env.machines(s.cluster).length > 3 ? true : undefined));
      const cutAt = Date.now();
      lab.partition(['fp'], everyHostBut(s));
      await sleep(30_000);
      const healedAt = Date.now();
      lab.heal();
      const run = await scale.done;
      const waited = /waiting: /.test(run.stderr);
      const givenUp = s.env.events(s.cluster).filter((e) => e.action === 'MarkMachineFailed');
      return { run, expectationMet: membershipChangesBetween(s, cutAt, healedAt) === 0 && givenUp.length === 0 && waited && votersOf(run) === 5 };
    },
  },
  {
    name: 'the leader partitioned from the majority during a promotion (network lab)',
    addressPrefix: '127.164',
    lab: { number: 63, hosts: 6 },
    spec: { replicas: 3 },
    converges: true,
    expectation: 'the majority elects another leader, etcd never lists more learners than the members run, the scale-up finishes after the heal',
    async act(s) {
      const { lab } = labOf(s);
      const watch = new ClusterWatch(s.access);
      watch.start();
      try {
        const leaderHost = hostOfMachine(s, await s.leader());
        const scale = scaleTo(s, 5);
        await s.learnerListed();
        lab.partition([leaderHost], everyHostBut(s, leaderHost));
        const oldLeader = labOf(s).info.hosts[leaderHost - 1]?.address ?? '-';
        const elected = await watch.until((x) => x.leaderPeerURL !== undefined && !x.leaderPeerURL.includes(`//${oldLeader}:`), 20_000).then(
          () => true,
          () => false,
        );
        await sleep(8_000);
        lab.heal();
        const run = await scale.done;
        const limit = learnerLimitOf(s.env.machines(s.cluster));
        return { run, expectationMet: elected && watch.samples.every((x) => x.learners <= limit) && votersOf(run) === 5 };
      } finally {
        await watch.stop();
      }
    },
  },
  {
    name: 'a learner isolated mid catch-up, another catching up beside it (network lab)',
    addressPrefix: '127.165',
    lab: { number: 63, hosts: 5 },
    // A learner serves (and so answers its status) only once it has caught up: until then its start is
    // its last progress, so learnerStuckAfter must exceed a normal catch-up (~9 s alone at the rate
    // below, longer while the two share the leader's link). 1 -> 3 on etcd 3.6 (maxLearners auto): both
    // learners catch up at once.
    spec: { replicas: 1, remediation: { unhealthyAfter: '60s', learnerStuckAfter: '30s' } },
    converges: true,
    expectation:
      'two learners catch up at once; the isolated one is found stuck, removed (LearnerStuck) and replaced, the other is judged on its own progress and promoted; etcd never lists more learners than the limit',
    async act(s) {
      const { lab } = labOf(s);
      // 2 MiB of values to replicate, through a leader limited to 2 Mbit/s: catch-up takes seconds. (A
      // limit on the learners' hosts would slow the etcd binary's first copy to them as well.)
      const kv = kvClientFor(s.access);
      try {
        for (let i = 0; i < 8; i++) await kv.put(`/chaos-bulk/${String(i)}`).value('b'.repeat(256 * 1024));
      } finally {
        kv.close();
      }
      lab.rate('2mbit', [hostOfMachine(s, await s.leader())]);
      const watch = new ClusterWatch(s.access);
      watch.start();
      try {
        const scale = scaleTo(s, 3);
        // The second learner to start is cut off: it has the most of its catch-up still ahead.
        const [, learner = ''] = await s.namedLearners(2);
        const together = await watch.until((x) => x.learners >= 2, 5_000).then(
          () => true,
          () => false,
        );
        await sleep(2_000);
        const learnerHost = hostOfMachine(s, learner);
        lab.partition([learnerHost], everyHostBut(s, learnerHost));
        const removed = await waitFor(
          'the isolated learner to be removed',
          () => s.env.events(s.cluster).find((e) => e.action === 'RemoveMember' && e.outcome === 'Succeeded' && e.machine === learner),
          // learnerStuckAfter plus a loaded host's slow passes: a hang guard, not a figure.
          150_000,
        );
        lab.heal();
        const run = await scale.done;
        const events = s.env.events(s.cluster);
        const stuck = events.some((e) => e.action === 'MarkMachineFailed' && e.machine === learner && e.message.includes('LearnerStuck'));
        // The learners added beside it are judged on their own progress: promoted, never failed.
        const beside = events.filter((e) => e.action === 'AddLearner' && e.outcome === 'Succeeded' && e.machine !== learner && e.at < removed.at).map((e) => e.machine);
        const done = (action: string, machine: string | undefined): boolean => events.some((e) => e.action === action && e.machine === machine && e.outcome === 'Succeeded');
        const besidePromoted = beside.length > 0 && beside.every((m) => done('PromoteLearner', m) && !done('MarkMachineFailed', m));
        const limit = learnerLimitOf(s.env.machines(s.cluster));
        const withinLimit = watch.samples.every((x) => x.learners <= limit);
        return { run, expectationMet: together && stuck && besidePromoted && withinLimit && s.deleted(learner) && votersOf(run) === 3 };
      } finally {
        await watch.stop();
      }
    },
  },
  {
    name: 'a minority partitioned during a scale-up, healed later (network lab)',
    addressPrefix: '127.166',
    lab: { number: 63, hosts: 6 },
    // Kept, not remediated: the partition is shorter than unhealthyAfter.
    spec: { replicas: 3, remediation: { unhealthyAfter: '60s' } },
    converges: true,
    expectation: 'no learner is added while a voter is cut off from the others; the scale-up finishes after the heal with that voter kept',
    async act(s) {
      const { lab } = labOf(s);
      const scale = scaleTo(s, 5);
      await waitFor('a fourth voter', () => (s.env.machines(s.cluster).filter((m) => m.phase === 'Voter').length >= 4 ? true : undefined), 90_000);
      const leader = await s.leader();
      const cut = s.env.machines(s.cluster).find((m) => m.phase === 'Voter' && m.name !== leader)?.name ?? '';
      const cutHost = hostOfMachine(s, cut);
      const cutAt = Date.now();
      lab.partition([cutHost], everyHostBut(s, cutHost));
      await sleep(12_000);
      const healedAt = Date.now();
      lab.heal();
      const run = await scale.done;
      const added = s.env.events(s.cluster).filter((e) => e.action === 'AddLearner' && e.outcome === 'Succeeded' && e.at > cutAt + 2_000 && e.at < healedAt).length;
      return { run, expectationMet: added === 0 && s.machineNames().includes(cut) && votersOf(run) === 5 };
    },
  },
  {
    name: '5% packet loss on every host during a whole 0 -> 5 bring-up (network lab)',
    addressPrefix: '127.167',
    lab: { number: 63, hosts: 6 },
    converges: true,
    expectation: 'the bring-up converges with five voters through the loss',
    async act(s) {
      const { lab } = labOf(s);
      lab.loss(5);
      const file = s.env.writeManifest(s.cluster, s.withMode({ replicas: 5, provider: s.lab?.provider }));
      const up = s.env.start(['up', '-f', file, '--timeout', '4m', '-o', 'json']);
      const doc = await waitFor(
        'the init member to serve',
        async () => {
          const d = await s.status().catch(() => undefined);
          return d !== undefined && d.status.endpoints.length > 0 ? d : undefined;
        },
        120_000,
      );
      s.startWriter(doc.status);
      const run = await up.done;
      lab.heal();
      return { run, expectationMet: votersOf(run) === 5 };
    },
  },
  {
    name: 'a one-way partition (A cannot reach B, B reaches A) during a rollout (network lab)',
    addressPrefix: '127.168',
    lab: { number: 63, hosts: 5 },
    spec: { replicas: 3, version: '3.4.23', remediation: { unhealthyAfter: '60s' } },
    converges: true,
    expectation: 'the rollout finishes after the heal: every member at 3.5.16',
    async act(s) {
      const { lab } = labOf(s);
      const rollout = s.env.start(['rollout', s.cluster, '--version', '3.5.16', '--timeout', '3m', '-o', 'json']);
      await waitFor('the first upgraded voter', () => (s.env.machines(s.cluster).some((m) => m.version === '3.5.16' && m.phase === 'Voter') ? true : undefined), 90_000);
      const leader = await s.leader();
      const other = s.env.machines(s.cluster).find((m) => m.phase === 'Voter' && m.name !== leader)?.name ?? '';
      lab.oneway([hostOfMachine(s, leader)], [hostOfMachine(s, other)]);
      await sleep(10_000);
      lab.heal();
      const run = await rollout.done;
      return { run, expectationMet: run.code === 0 && statusOf(run.stdout).status.machines.every((m) => m.version === '3.5.16') };
    },
  },
];

import type { ChaosScenario } from './scenarios.ts';
import { waitFor } from './scenarios.ts';
import { MEMBERSHIP_ACTIONS } from '../support/cli.ts';

// Network faults on the lab (scripts/netlab.sh): members are hosts in their own network namespaces,
// reached by the ssh provider, and faults are nftables rules inside those namespaces.

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

export const NETWORK_SCENARIOS: ChaosScenario[] = [
  {
    name: 'fastplane cut off from every member for 30 s mid-scale (network lab)',
    addressPrefix: '127.163',
    lab: { number: 63, hosts: 6 },
    spec: { replicas: 3 },
    converges: true,
    expectation: 'no membership change while cut off, waits with a reason, finishes after the heal',
    async act(s) {
      const lab = s.lab?.lab;
      if (!lab) throw new Error('this scenario needs its lab');
      const scale = s.env.start(['scale', s.cluster, '--replicas', '5', '--timeout', '3m', '-o', 'json']);
      await waitFor('the scale-up to create a machine', () => (s.env.machines(s.cluster).length > 3 ? true : undefined));
      const cutAt = Date.now();
      lab.partition(['fp'], [1, 2, 3, 4, 5, 6]);
      await sleep(30_000);
      const healedAt = Date.now();
      lab.heal();
      const run = await scale.done;
      // A call already on its way when the cut came may still end inside it; none may start there.
      const changedWhileCut = s.env
        .events(s.cluster)
        .filter((e) => e.action !== undefined && MEMBERSHIP_ACTIONS.has(e.action) && e.outcome === 'Succeeded' && e.at > cutAt + 2_000 && e.at < healedAt);
      const waited = /waiting: /.test(run.stderr);
      return { run, expectationMet: changedWhileCut.length === 0 && waited };
    },
  },
];

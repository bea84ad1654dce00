import { describe } from 'node:test';
import { scenarioTest } from './scenario-test.ts';
import { GUARDED_IN_SUITE, OLDER_VERSION_SCENARIOS, SCENARIOS } from './scenarios.ts';

// Every scenario with etcd's own reconfiguration checks, on the default version (etcd 3.6) unless it
// names one (rollouts 3.4.23 → 3.5.16 and 3.6.17 → 3.7.4), and two of them again on 3.4.23
// (OLDER_VERSION_SCENARIOS); then, in guarded mode (reconfigurationCheck:
// fastplane, etcd's checks off), only GUARDED_IN_SUITE: the leader killed during a promotion, two of
// five voters killed, a voter frozen during a scale-up. `npm run chaos` runs all of them in both modes.
// The network scenarios have their own file (network-chaos.test.ts), so the two run side by side.
describe('chaos on real etcd, with a writer that counts', { timeout: 2_400_000 }, () => {
  for (const scenario of [...SCENARIOS, ...OLDER_VERSION_SCENARIOS]) scenarioTest(scenario, 'etcd');
  for (const scenario of SCENARIOS.filter((s) => GUARDED_IN_SUITE.has(s.name))) scenarioTest(scenario, 'fastplane');
});

import { describe } from 'node:test';
import { scenarioTest } from './scenario-test.ts';
import { GUARDED_IN_SUITE, SCENARIOS } from './scenarios.ts';

// Every scenario with etcd's own reconfiguration checks; then, in guarded mode (reconfigurationCheck:
// fastplane, etcd's checks off), only GUARDED_IN_SUITE: the leader killed during a promotion, two of
// five voters killed, a voter frozen during a scale-up. `npm run chaos` runs all of them in both modes.
// The network scenarios have their own file (network-chaos.test.ts), so the two run side by side.
describe('chaos on real etcd, with a writer that counts', { timeout: 1_200_000 }, () => {
  for (const scenario of SCENARIOS) scenarioTest(scenario, 'etcd');
  for (const scenario of SCENARIOS.filter((s) => GUARDED_IN_SUITE.has(s.name))) scenarioTest(scenario, 'fastplane');
});

import { describe } from 'node:test';
import { NETWORK_SCENARIOS } from './network-scenarios.ts';
import { scenarioTest } from './scenario-test.ts';

// Network faults on a lab of network namespaces (FPL_LAB 63), members reached over SSH, in etcd's
// reconfiguration mode; `npm run chaos` also runs them guarded.
describe('network chaos on real etcd, with a writer that counts', { timeout: 1_200_000 }, () => {
  for (const scenario of NETWORK_SCENARIOS) scenarioTest(scenario, 'etcd');
});

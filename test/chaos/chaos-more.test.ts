import { describe } from 'node:test';
import { scenarioTest } from './scenario-test.ts';
import { suiteRuns } from './scenarios.ts';

// Chaos on etcd 3.6 with etcd's own reconfiguration checks: the scenarios chaos.test.ts leaves.
describe('more chaos on real etcd, with a writer that counts', { timeout: 1_200_000 }, () => {
  for (const [scenario, mode] of suiteRuns('etcd-checks-2')) scenarioTest(scenario, mode);
});

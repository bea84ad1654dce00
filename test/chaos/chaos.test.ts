import { describe } from 'node:test';
import { scenarioTest } from './scenario-test.ts';
import { suiteRuns } from './scenarios.ts';

// Chaos on etcd 3.6 with etcd's own reconfiguration checks, every other scenario (the others are in
// chaos-more.test.ts, the guarded runs and etcd 3.4 in chaos-guarded.test.ts): three files of about
// 3 minutes each, which the test runner can run side by side.
describe('chaos on real etcd, with a writer that counts', { timeout: 1_200_000 }, () => {
  for (const [scenario, mode] of suiteRuns('etcd-checks-1')) scenarioTest(scenario, mode);
});

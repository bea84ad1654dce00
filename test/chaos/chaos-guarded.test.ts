import { describe } from 'node:test';
import { scenarioTest } from './scenario-test.ts';
import { suiteRuns } from './scenarios.ts';

// The scenarios where the reconfiguration mode matters most, with etcd's checks and then guarded
// (reconfigurationCheck: fastplane, etcd's checks off), and two of them on etcd 3.4.23, the oldest.
describe('chaos in both reconfiguration modes and on the oldest etcd, with a writer that counts', { timeout: 1_200_000 }, () => {
  for (const [scenario, mode] of suiteRuns('guarded-and-oldest')) scenarioTest(scenario, mode);
});

import { ModelEtcdAdmin, ModelProvider } from '../../src/sim/model-adapters.ts';
import { MEASURED_TIMINGS, ModelWorld } from '../../src/sim/model-world.ts';
import { seededRandom } from '../../src/sim/random.ts';
import { VirtualClock } from '../../src/sim/virtual-clock.ts';
import { defineEtcdAdminContract, type ContractWorld } from './etcd-admin-contract.ts';

/**
 * The same contract real etcd passes (real-etcd.test.ts), run against the simulator's model on virtual
 * time. When the two disagree, the model is what gets fixed: the property tests and the simulator are
 * only as good as the model is faithful.
 */
function modelWorld(version: string, seed: number): Promise<ContractWorld> {
  const clock = new VirtualClock(1_700_000_000_000);
  // Real machines are never ready at once; a short provisioning delay keeps the polling honest.
  const world = new ModelWorld(clock, seededRandom(seed), { ...MEASURED_TIMINGS, provisioning: { minMs: 0, maxMs: 300 } });
  return Promise.resolve({
    admin: new ModelEtcdAdmin(world),
    provider: new ModelProvider(world),
    clock,
    cluster: 'contract',
    version,
    teardown: () => Promise.resolve(),
  });
}

defineEtcdAdminContract('EtcdAdmin contract: ModelEtcdAdmin + ModelProvider (etcd 3.4.23 rules)', () => modelWorld('3.4.23', 1));
defineEtcdAdminContract('EtcdAdmin contract: ModelEtcdAdmin + ModelProvider (etcd 3.5.16 rules)', () => modelWorld('3.5.16', 2));

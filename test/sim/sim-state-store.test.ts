import { isProcessAlive } from '../../src/adapters/memory-state-store.ts';
import { SimStateStore } from '../../src/sim/sim-state-store.ts';
import { defineStateStoreContract } from '../contract/state-store-contract.ts';

// The simulator's store must behave exactly like the memory and SQLite stores it stands in for.
defineStateStoreContract('simulator (SimStateStore)', () => {
  const store = new SimStateStore(isProcessAlive);
  return { store, cleanup: () => { store.close(); } };
});

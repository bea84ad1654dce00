import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { cliEnvFactory, statusOf } from '../support/cli.ts';
import { askEtcd } from '../support/etcd-direct.ts';

const newEnv = cliEnvFactory();
const ROUNDS = 10;

describe('machine ordinals and addresses are reused, on real etcd', { timeout: 600_000 }, () => {
  // Ten rounds show reuse: without it the tenth machine would take ordinal 11 and an eleventh address.
  // The long run (300 replacements within the 254 ordinals) is the model's property test.
  test(`${String(ROUNDS)} replacements of a member never exhaust the cluster’s addresses`, async () => {
    const env = newEnv('127.153');
    // A new quota is a template change: each apply replaces the member (surge first, then removal).
    const apply = (quotaMiB: number): string => env.writeManifest('rep', { replicas: 1, version: '3.4.23', etcd: { quotaBackendBytes: quotaMiB * 1024 * 1024 } });
    const addresses = new Set<string>();
    let highestOrdinal = 0;
    for (let round = 0; round <= ROUNDS; round++) {
      const run = await env.run(['up', '-f', apply(2048 + round), '--timeout', '90s', '-o', 'json']);
      assert.equal(run.code, 0, `round ${String(round)}: ${run.stderr}`);
      const doc = statusOf(run.stdout);
      for (const machine of doc.status.machines) if (machine.address !== null) addresses.add(machine.address);
      highestOrdinal = Math.max(highestOrdinal, ...env.machines('rep').map((m) => m.ordinal));
    }
    const replaced = env.events('rep').filter((e) => e.action === 'DeleteMachine' && e.outcome === 'Succeeded').length;
    assert.ok(replaced >= ROUNDS, `${String(ROUNDS)} machines were replaced (${String(replaced)})`);
    assert.ok(highestOrdinal <= 3, `ordinals stay low: ${String(highestOrdinal)} after ${String(replaced)} replacements`);
    assert.ok(addresses.size <= 3, `addresses are reused: ${[...addresses].join(', ')}`);
    const last = statusOf((await env.run(['status', 'rep', '-o', 'json'])).stdout);
    const { members } = await askEtcd(last.status);
    assert.equal(members.length, 1);
  });
});

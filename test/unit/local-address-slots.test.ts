import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { AddressSlots, type AddressClaims } from '../../src/adapters/providers/local/local-address-slots.ts';
import type { ResourceClaim } from '../../src/ports/state-store.ts';

/** Claims kept in memory, each call answered after a delay, as a remote store (the API server) answers. */
class SlowClaims implements AddressClaims {
  readonly claims: ResourceClaim[] = [];
  async claim(pool: string, key: string, owner: string): Promise<boolean> {
    await sleep(15);
    const held = this.claims.find((c) => c.pool === pool && c.key === key);
    if (held !== undefined) return held.owner === owner;
    this.claims.push({ pool, key, owner });
    return true;
  }
  async releaseClaim(pool: string, key: string, owner: string): Promise<void> {
    await sleep(15);
    const at = this.claims.findIndex((c) => c.pool === pool && c.key === key && c.owner === owner);
    if (at >= 0) this.claims.splice(at, 1);
  }
  async listClaims(pool: string): Promise<ResourceClaim[]> {
    await sleep(15);
    return this.claims.filter((c) => c.pool === pool);
  }
}

const dir = mkdtempSync(join(tmpdir(), 'fastplane-slots-'));
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

test('machines of one cluster asking for their slot at once all get the same one, and its claim stays', async () => {
  const claims = new SlowClaims();
  const slots = new AddressSlots(dir, '127.97', claims);
  const answers = await Promise.all([slots.slotFor('web'), slots.slotFor('web'), slots.slotFor('web')]);
  assert.equal(new Set(answers).size, 1, `one slot for every machine, got ${answers.join(', ')}`);
  assert.deepEqual(claims.claims, [{ pool: 'local-addresses/127.97', key: String(answers[0]), owner: 'web' }]);
  // Another cluster of the same store gets another slot, and asking again gives the same answer.
  const other = await slots.slotFor('db');
  assert.notEqual(other, answers[0]);
  assert.equal(await slots.slotFor('web'), answers[0]);
  await slots.release('web');
  await slots.release('db');
  assert.deepEqual(claims.claims, []);
});

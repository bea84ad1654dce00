import { existsSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { InvalidInputError } from '../../../api/errors.ts';
import { withLock, writeFileAtomic } from '../../state-files.ts';

/**
 * The local provider's address blocks: each cluster of a state dir gets a slot (the third octet of its
 * machines' addresses), kept in the state dir's slots.json and claimed host-wide, one file per block
 * in `claimsDir`, so that clusters of other state dirs on this host never get the same addresses.
 */
export class AddressSlots {
  constructor(
    private readonly stateDir: string,
    private readonly addressPrefix: string,
    private readonly claimsDir: string,
  ) {}

  /** The cluster's slot, allocated once and claimed host-wide. */
  async slotFor(cluster: string): Promise<number> {
    // The cluster's folder exists before its claim: a claim whose folder is gone is stale.
    await mkdir(join(this.stateDir, 'clusters', cluster), { recursive: true });
    let slot = 0;
    await this.withSlots(async (slots) => {
      const own = slots[cluster];
      if (own !== undefined && (await this.claim(own, cluster))) {
        slot = own;
        return slots;
      }
      const taken = new Set(Object.values(slots));
      for (let candidate = 1; candidate <= 254 && slot === 0; candidate++) {
        if (!taken.has(candidate) && (await this.claim(candidate, cluster))) slot = candidate;
      }
      if (slot === 0) throw new InvalidInputError(['all 254 cluster slots of the local provider are taken on this host; run `fastplane down` on old clusters']);
      return { ...slots, [cluster]: slot };
    });
    return slot;
  }

  private claimPath(slot: number): string {
    return join(this.claimsDir, `${this.addressPrefix}.${String(slot)}`);
  }

  private async claimOwner(slot: number): Promise<{ stateDir: string; cluster: string } | undefined> {
    try {
      return JSON.parse(await readFile(this.claimPath(slot), 'utf8')) as { stateDir: string; cluster: string };
    } catch {
      return undefined;
    }
  }

  /** Claims a slot for the cluster (exclusive create); a claim whose cluster folder is gone is taken over. */
  private async claim(slot: number, cluster: string): Promise<boolean> {
    await mkdir(this.claimsDir, { recursive: true, mode: 0o1777 });
    for (let attempt = 0; attempt < 2; attempt++) {
      try {
        await writeFile(this.claimPath(slot), JSON.stringify({ stateDir: this.stateDir, cluster }), { flag: 'wx' });
        return true;
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      }
      const owner = await this.claimOwner(slot);
      if (owner?.stateDir === this.stateDir && owner.cluster === cluster) return true;
      if (owner && existsSync(join(owner.stateDir, 'clusters', owner.cluster))) return false;
      await rm(this.claimPath(slot), { force: true });
    }
    return false;
  }

  /** Read-modify-write of slots.json under a lock file, since two CLI processes may create clusters at once. */
  private async withSlots(update: (slots: Record<string, number>) => Promise<Record<string, number>> | Record<string, number>): Promise<void> {
    const path = join(this.stateDir, 'provider', 'slots.json');
    await mkdir(dirname(path), { recursive: true });
    await withLock(`${path}.lock`, async () => {
      const slots = existsSync(path) ? (JSON.parse(await readFile(path, 'utf8')) as Record<string, number>) : {};
      await writeFileAtomic(path, `${JSON.stringify(await update(slots), null, 2)}\n`);
    });
  }

  /** Gives the cluster's slot back (fastplane down). */
  async release(cluster: string): Promise<void> {
    let slot: number | undefined;
    await this.withSlots((slots) => {
      slot = slots[cluster];
      return Object.fromEntries(Object.entries(slots).filter(([owner]) => owner !== cluster));
    });
    if (slot !== undefined && (await this.claimOwner(slot))?.stateDir === this.stateDir) await rm(this.claimPath(slot), { force: true });
  }
}

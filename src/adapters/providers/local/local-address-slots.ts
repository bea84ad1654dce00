import { existsSync, readFileSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { InvalidInputError } from '../../../api/errors.ts';
import type { ResourceClaim } from '../../../ports/state-store.ts';
import { withLock, writeFileAtomic } from '../../state-files.ts';

/**
 * The local provider's address blocks: each cluster gets a slot, the third octet of its machines'
 * addresses (`<prefix>.<slot>.<ordinal>`).
 *
 * Which cluster has which slot is a claim in the state store (pool `local-addresses/<prefix>`, key the
 * slot, owner the cluster), so every fastplane process using that store, on this host or another,
 * sees the same assignment and two of them never take the same slot. Processes with *different*
 * stores on one host (two state dirs, each its own SQLite file) cannot see each other's claims, so a
 * new slot is also checked on the host before it is used: nothing may listen on any address of its
 * block (a running member of another store's cluster), and this process must be able to bind the
 * block's guard address `<prefix>.<slot>.0` (no machine has ordinal 0). The guard stays bound while
 * the process lives, so a concurrent fastplane process of another store, whose machines are not
 * listening yet, finds the block busy too. A busy slot is given back and the next one tried.
 */

/** The claims part of a StateStore. */
export interface AddressClaims {
  claim(pool: string, key: string, owner: string): Promise<boolean>;
  releaseClaim(pool: string, key: string, owner: string): Promise<void>;
  listClaims(pool: string): Promise<ResourceClaim[]>;
}

const GUARD_PORT = 2380;
const LISTEN = '0A';

/** Claims for a provider built without a store (tests, tools): shared by this process only. */
class ProcessClaims implements AddressClaims {
  private readonly owners = new Map<string, string>();
  claim(pool: string, key: string, owner: string): Promise<boolean> {
    const id = `${pool}\n${key}`;
    const current = this.owners.get(id) ?? owner;
    this.owners.set(id, current);
    return Promise.resolve(current === owner);
  }
  releaseClaim(pool: string, key: string, owner: string): Promise<void> {
    const id = `${pool}\n${key}`;
    if (this.owners.get(id) === owner) this.owners.delete(id);
    return Promise.resolve();
  }
  listClaims(pool: string): Promise<ResourceClaim[]> {
    const claims = [...this.owners].flatMap(([id, owner]) => {
      const [claimPool = '', key = ''] = id.split('\n');
      return claimPool === pool ? [{ pool, key, owner }] : [];
    });
    return Promise.resolve(claims);
  }
}

const processClaims = new ProcessClaims();

/**
 * Slot lookups in flight in this process, by pool and cluster: a parallel bring-up asks for every
 * machine's address at once, and two lookups of one cluster must not race (the second would see the
 * first's guard, take it for another store's cluster and give the shared claim back).
 */
const lookups = new Map<string, Promise<number>>();

/** Guard addresses this process holds, with their listening sockets (unref'd: they never keep it alive). */
const guards = new Map<string, Server>();

async function holdGuard(address: string): Promise<boolean> {
  if (guards.has(address)) return true;
  const server = createServer();
  try {
    server.listen({ host: address, port: GUARD_PORT, exclusive: true });
    await once(server, 'listening');
  } catch {
    return false;
  }
  server.unref();
  guards.set(address, server);
  return true;
}

function dropGuard(address: string): void {
  guards.get(address)?.close();
  guards.delete(address);
}

/** IPv4 addresses with a listening TCP socket on this host, from /proc/net/tcp; undefined when unreadable. */
function listeningAddresses(): Set<string> | undefined {
  let text: string;
  try {
    text = readFileSync('/proc/net/tcp', 'utf8');
  } catch {
    return undefined;
  }
  const addresses = new Set<string>();
  for (const line of text.split('\n').slice(1)) {
    const [, local, , state] = line.trim().split(/\s+/);
    if (local === undefined || state !== LISTEN) continue;
    // The address is a 32-bit number in host byte order (little-endian here): its low byte is the first octet.
    const value = Number.parseInt(local.slice(0, 8), 16);
    addresses.add([value & 0xff, (value >>> 8) & 0xff, (value >>> 16) & 0xff, value >>> 24].join('.'));
  }
  return addresses;
}

async function canBind(address: string, port: number): Promise<boolean> {
  const server = createServer();
  try {
    server.listen({ host: address, port, exclusive: true });
    await once(server, 'listening');
    return true;
  } catch {
    return false;
  } finally {
    if (server.listening) await new Promise((resolve) => server.close(resolve));
  }
}

export class AddressSlots {
  private readonly claims: AddressClaims;
  private readonly pool: string;

  constructor(
    private readonly stateDir: string,
    private readonly addressPrefix: string,
    claims?: AddressClaims,
  ) {
    this.claims = claims ?? processClaims;
    this.pool = `local-addresses/${addressPrefix}`;
  }

  /** The cluster's slot: its claim in the store, or a new one that is free on this host. */
  slotFor(cluster: string): Promise<number> {
    const key = `${this.pool}\n${cluster}`;
    const pending = lookups.get(key);
    if (pending !== undefined) return pending;
    const lookup = this.lookUp(cluster).finally(() => lookups.delete(key));
    lookups.set(key, lookup);
    return lookup;
  }

  private async lookUp(cluster: string): Promise<number> {
    // The provider's files for the cluster live there from its first address on.
    await mkdir(join(this.stateDir, 'clusters', cluster), { recursive: true });
    const claims = await this.claims.listClaims(this.pool);
    const own = claims.find((claim) => claim.owner === cluster);
    if (own !== undefined) {
      const slot = Number(own.key);
      // Best effort: another process of this store may be working on the cluster and hold the guard.
      await holdGuard(this.guardAddress(slot));
      return slot;
    }
    const legacy = await this.legacySlot(cluster);
    if (legacy !== undefined && (await this.claims.claim(this.pool, String(legacy), cluster))) {
      // Kept from before claims were in the store: its members may be running there already.
      await holdGuard(this.guardAddress(legacy));
      return legacy;
    }
    const taken = new Set(claims.map((claim) => Number(claim.key)));
    for (let slot = 1; slot <= 254; slot++) {
      if (taken.has(slot) || !(await this.claims.claim(this.pool, String(slot), cluster))) continue;
      if (await this.freeOnHost(slot)) return slot;
      await this.claims.releaseClaim(this.pool, String(slot), cluster);
    }
    throw new InvalidInputError([`all 254 address slots of ${this.addressPrefix} are taken (in the store or on this host); run \`fastplane down\` on old clusters`]);
  }

  /** Gives the cluster's slot back (fastplane down). */
  async release(cluster: string): Promise<void> {
    for (const claim of await this.claims.listClaims(this.pool)) {
      if (claim.owner !== cluster) continue;
      dropGuard(this.guardAddress(Number(claim.key)));
      await this.claims.releaseClaim(this.pool, claim.key, cluster);
    }
    await this.forgetLegacySlot(cluster);
  }

  private guardAddress(slot: number): string {
    return `${this.addressPrefix}.${String(slot)}.0`;
  }

  /** Nobody on this host uses the block: no listener on it, and its guard is free (now held by us). */
  private async freeOnHost(slot: number): Promise<boolean> {
    const guard = this.guardAddress(slot);
    // Held by this very process for a cluster of another store (tests run several in one process).
    if (guards.has(guard)) return false;
    if (!(await holdGuard(guard))) return false;
    const block = `${this.addressPrefix}.${String(slot)}.`;
    const listening = listeningAddresses();
    const busy =
      listening === undefined
        ? !(await canBind(`${block}1`, GUARD_PORT))
        : [...listening].some((address) => address.startsWith(block) && address !== guard);
    if (busy) dropGuard(guard);
    return !busy;
  }

  private legacyPath(): string {
    return join(this.stateDir, 'provider', 'slots.json');
  }

  /** The slot a state dir recorded before claims moved into the store (provider/slots.json). */
  private async legacySlot(cluster: string): Promise<number | undefined> {
    if (!existsSync(this.legacyPath())) return undefined;
    try {
      return (JSON.parse(await readFile(this.legacyPath(), 'utf8')) as Record<string, number>)[cluster];
    } catch {
      return undefined;
    }
  }

  private async forgetLegacySlot(cluster: string): Promise<void> {
    const path = this.legacyPath();
    if (!existsSync(path)) return;
    await withLock(`${path}.lock`, async () => {
      const slots = JSON.parse(await readFile(path, 'utf8')) as Record<string, number>;
      if (!(cluster in slots)) return;
      const rest = Object.fromEntries(Object.entries(slots).filter(([owner]) => owner !== cluster));
      await writeFileAtomic(path, `${JSON.stringify(rest, null, 2)}\n`);
    });
  }
}

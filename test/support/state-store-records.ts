import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { ownIdentity } from '../../src/adapters/host/process-identity.ts';
import { defaultControlPlane, type ControlPlane } from '../../src/api/control-plane.ts';
import type { LeaseHolder, ProcessIdentity, StateStore, WriterLease } from '../../src/ports/state-store.ts';

// The records a StateStore contract case writes, and the lease holders it names.

export const T0 = 1_000_000;

export function manifest(name: string, replicas = 3): ControlPlane {
  const m = defaultControlPlane(name);
  return { ...m, spec: { ...m.spec, replicas } };
}

/** This process as the kernel knows it: the tests run where /proc tells. */
export function self(): ProcessIdentity {
  const identity = ownIdentity();
  assert.ok(identity, 'this process has an identity (/proc is readable and its own)');
  return identity;
}

export type HolderOptions = Partial<Omit<LeaseHolder, 'identity'>> & { identity?: ProcessIdentity | null };

/** A holder record; by default this very process, alive (`identity: null`: a record without one). */
export function holder(token: string, options: HolderOptions = {}): LeaseHolder {
  const { identity = self(), ...rest } = options;
  return { token, holder: `test:${token}`, host: hostname(), pid: process.pid, ttlMs: 10_000, ...(identity === null ? {} : { identity }), ...rest };
}

/** Creates the control plane and takes its lease: what a reconcile pass starts from. */
export async function leased(store: StateStore, name: string, token = `${name}-writer`): Promise<WriterLease> {
  await store.applySpec(manifest(name), T0);
  assert.equal(await store.acquireLease(name, holder(token), T0), true);
  return { cluster: name, token };
}

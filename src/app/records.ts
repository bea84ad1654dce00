import type { ControlPlane } from '../api/control-plane.ts';
import { InvalidInputError } from '../api/errors.ts';
import type { ControlPlaneRecord } from '../domain/machine.ts';
import type { Runtime } from './runtime.ts';

/** The control plane's record; bad input (exit 2) when there is none. */
export async function controlPlaneRecord(runtime: Runtime, name: string): Promise<ControlPlaneRecord> {
  const cp = await runtime.store.getControlPlane(name);
  if (!cp) throw new InvalidInputError([`no control plane named ${name} in ${runtime.storeLocation}; create it with fastplane up`]);
  return cp;
}

/** The stored spec of a control plane; bad input (exit 2) when there is none. */
export async function storedManifest(runtime: Runtime, name: string): Promise<ControlPlane> {
  return (await controlPlaneRecord(runtime, name)).manifest;
}

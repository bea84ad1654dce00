import { controlPlaneRecord } from './records.ts';
import type { Runtime } from './runtime.ts';

/** How to reach a control plane as a client: its voters' client URLs and fastplane's client certificate. */
export interface ClientAccess {
  endpoints: string[];
  cacert?: string;
  cert?: string;
  key?: string;
}

/** Undefined while the control plane has no voting member yet. */
export async function clientAccess(runtime: Runtime, name: string): Promise<ClientAccess | undefined> {
  const cp = await controlPlaneRecord(runtime, name);
  const endpoints = (await runtime.store.listMachines(name)).flatMap((m) => (m.phase === 'Voter' && m.clientURL !== undefined ? [m.clientURL] : []));
  if (endpoints.length === 0) return undefined;
  const tls = runtime.provider(cp.manifest).clientTls(name);
  return { endpoints, ...(tls === undefined ? {} : { cacert: tls.caFile, cert: tls.certFile, key: tls.keyFile }) };
}

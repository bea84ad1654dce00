import { once } from 'node:events';
import { createServer } from 'node:net';
import { InvalidInputError } from '../../../api/errors.ts';
import { writeFileAtomic } from '../../state-files.ts';

const NAME = /^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$/i;

/** A local machine as its `machine.json` records it (epoch ms). */
export interface MachineFile {
  cluster: string;
  name: string;
  ordinal: number;
  failureDomain?: string;
  address: string;
  clientURL: string;
  peerURL: string;
  createdAt: number;
  readyAt: number;
  pid?: number;
  version?: string;
  memberStartedAt?: number;
  deleting?: boolean;
  deleteAt?: number;
}

/** A machine as the provider's own file records it (epoch ms). */
/** Fails with InvalidInputError when address:port cannot be bound (taken, or not a local address). */
export async function assertAddressFree(address: string, port: number): Promise<void> {
  const server = createServer();
  try {
    server.listen({ host: address, port, exclusive: true });
    await once(server, 'listening');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? String(error);
    throw new InvalidInputError([`${address}:${String(port)} is not free (${code}); stop whatever uses it or pick another address`]);
  } finally {
    if (server.listening) await new Promise((resolve) => server.close(resolve));
  }
}

export function writeJsonAtomic(path: string, value: unknown): Promise<void> {
  return writeFileAtomic(path, `${JSON.stringify(value, null, 2)}\n`);
}

export function checkName(kind: string, name: string): void {
  // Names become folder names: no separators, no dot-dot.
  if (!NAME.test(name) || name.includes('..')) {
    throw new InvalidInputError([`${kind} name "${name}" must be 1-63 letters, digits, '.', '_' or '-', starting and ending with a letter or digit`]);
  }
}

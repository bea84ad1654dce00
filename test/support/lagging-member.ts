import type { ControlPlaneStatusDocument } from '../../src/reconciler/status.ts';
import { kvClientFor } from './etcd-direct.ts';

/**
 * Leaves `lagging` behind with the newest data on `ahead` only: `lagging` paused while `count` big
 * values (more than the socket buffers hold, so it truly falls behind instead of finding them in its
 * kernel buffers on SIGCONT) are written through `ahead`, then `ahead` SIGKILLed and `lagging`
 * resumed. Returns the keys etcd acknowledged.
 */
export async function leaveBehind(
  doc: ControlPlaneStatusDocument,
  machines: readonly { name: string; clientURL?: string }[],
  pidsOf: (machine: string) => number[],
  options: { lagging: string; ahead: readonly string[]; prefix: string; count: number },
): Promise<string[]> {
  for (const pid of pidsOf(options.lagging)) process.kill(pid, 'SIGSTOP');
  const padding = 'x'.repeat(32 * 1024);
  const endpoints = machines.filter((m) => options.ahead.includes(m.name)).flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));
  const client = kvClientFor(doc.status, endpoints);
  const acknowledged: string[] = [];
  try {
    for (let i = 0; i < options.count; i++) {
      const key = `${options.prefix}${String(i).padStart(4, '0')}`;
      await client.put(key).value(`v${String(i)}${padding}`);
      acknowledged.push(key);
    }
  } finally {
    client.close();
  }
  for (const machine of options.ahead) for (const pid of pidsOf(machine)) process.kill(pid, 'SIGKILL');
  await new Promise((resolve) => setTimeout(resolve, 500));
  for (const pid of pidsOf(options.lagging)) process.kill(pid, 'SIGCONT');
  return acknowledged;
}

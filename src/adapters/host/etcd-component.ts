import type { TlsFiles } from '../../ports/etcd-admin.ts';
import type { ComponentHealth, MachineComponent, MemberLaunch } from '../../ports/machine-provider.ts';
import { getJson } from './http-probe.ts';

/**
 * What a provider does its own way for a machine's etcd member: run its process (here, or over ssh on
 * the machine's host) and tell whether it runs. Health and version are asked of etcd itself, the same
 * for every provider.
 */
export interface EtcdProcess {
  start(launch: MemberLaunch): Promise<void>;
  stop(): Promise<void>;
  running(): Promise<boolean>;
  /** Where the member serves clients; undefined while the machine has no address yet. */
  clientURL(): Promise<string | undefined>;
}

/** A probe never holds a pass up for long: a member that does not answer in time is not healthy. */
const PROBE_TIMEOUT_MS = 2_000;

/** A machine's etcd component: `member` runs it, `clientTls` is what fastplane presents to it over https. */
export function etcdComponent(member: EtcdProcess, clientTls: () => Promise<TlsFiles | undefined>): MachineComponent<'etcd'> {
  const ask = async (path: string): Promise<Record<string, unknown>> => {
    const url = await member.clientURL();
    if (url === undefined) throw new Error('the machine has no address yet');
    const tls = url.startsWith('https:') ? await clientTls() : undefined;
    const answer = await getJson(`${url}${path}`, tls, PROBE_TIMEOUT_MS);
    return typeof answer === 'object' && answer !== null ? (answer as Record<string, unknown>) : {};
  };
  return {
    kind: 'etcd',
    start: (launch) => member.start(launch),
    stop: () => member.stop(),
    async health(): Promise<ComponentHealth> {
      if (!(await member.running())) return { running: false, healthy: false, reason: 'its process is not running' };
      try {
        const answer = await ask('/health');
        if (answer.health === 'true') return { running: true, healthy: true };
        const reason = typeof answer.reason === 'string' && answer.reason !== '' ? answer.reason : `/health answered ${JSON.stringify(answer)}`;
        return { running: true, healthy: false, reason };
      } catch (error) {
        return { running: true, healthy: false, reason: error instanceof Error ? error.message : String(error) };
      }
    },
    async version(): Promise<string | undefined> {
      try {
        const answer = await ask('/version');
        return typeof answer.etcdserver === 'string' ? answer.etcdserver : undefined;
      } catch {
        return undefined;
      }
    },
  };
}

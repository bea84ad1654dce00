import { createConnection } from 'node:net';
import type { Duplex } from 'node:stream';
import type { EndpointBackend } from '../../ports/machine-provider.ts';

/**
 * HAProxy's master CLI (`-S <socket>`): one command per connection, the answer ends when HAProxy
 * closes it. `@1 <command>` is passed to the current worker. Parsing is kept apart from the socket so
 * it is tested without a process.
 */

export function askMaster(socket: string, command: string, timeoutMs = 2000): Promise<string> {
  return askMasterOver(createConnection(socket), socket, command, timeoutMs);
}

/**
 * The same over a stream already connected to the socket (a channel SSH opened to it on another
 * host); `socket` names it in messages.
 */
export function askMasterOver(connection: Duplex, socket: string, command: string, timeoutMs = 2000): Promise<string> {
  return new Promise((resolve, reject) => {
    let answer = '';
    let failed = false;
    const timer = setTimeout(() => connection.destroy(new Error(`${socket} did not answer "${command}" within ${String(timeoutMs)} ms`)), timeoutMs);
    connection.setEncoding('utf8');
    connection.on('data', (chunk: string) => (answer += chunk));
    connection.on('error', (error) => {
      failed = true;
      clearTimeout(timer);
      reject(error);
    });
    connection.on('close', () => {
      clearTimeout(timer);
      if (!failed) resolve(answer);
    });
    // Closing our side tells the CLI the command is complete: it answers, then closes.
    connection.end(`${command}\n`);
  });
}

export interface MasterState {
  /** Reloads the master went through, and how many of them failed (it then kept the previous workers). */
  reloads: number;
  failed: number;
}

/** `show proc`'s master line: `<pid> master <reloads> [failed: <n>] <uptime> <version>`. */
export function parseShowProc(answer: string): MasterState | undefined {
  const match = /^\d+\s+master\s+(\d+)\s+\[failed:\s*(\d+)\]/m.exec(answer);
  if (match === null) return undefined;
  return { reloads: Number(match[1]), failed: Number(match[2]) };
}

/** `show stat` (CSV, its header a `# ` line): each server of `backend` and whether it is up (`UP`, or `UP 1/2` while going down). */
export function parseShowStat(answer: string, backend: string): { machine: string; up: boolean }[] {
  const lines = answer.split('\n');
  const header = lines.find((line) => line.startsWith('# '))?.slice(2).split(',') ?? [];
  const [proxy, server, status] = ['pxname', 'svname', 'status'].map((field) => header.indexOf(field));
  if (proxy === undefined || server === undefined || status === undefined || [proxy, server, status].includes(-1)) return [];
  return lines
    .filter((line) => line !== '' && !line.startsWith('#'))
    .map((line) => line.split(','))
    .filter((fields) => fields[proxy] === backend && fields[server] !== 'BACKEND' && fields[server] !== 'FRONTEND')
    .map((fields) => ({ machine: fields[server] ?? '', up: (fields[status] ?? '').startsWith('UP') }));
}

/**
 * The part of a `show servers state` answer a reload may carry over: its version and header lines,
 * and the lines of servers still at the same address. HAProxy would otherwise apply a saved port to a
 * server that moved. Fields: be_id be_name srv_id srv_name srv_addr ... srv_fqdn srv_port ...
 */
export function serverStatesToKeep(answer: string, backends: readonly EndpointBackend[]): string {
  const address = new Map(backends.map(({ machine, address }) => [machine, address]));
  const kept = answer.split('\n').filter((line) => {
    if (line === '' || line.startsWith('#') || /^\d+$/.test(line)) return line !== '';
    const fields = line.split(' ');
    const [name, ip, fqdn, port] = [fields[3], fields[4], fields[17], fields[18]];
    const wanted = name === undefined ? undefined : address.get(name);
    return wanted !== undefined && (wanted === `${ip ?? ''}:${port ?? ''}` || wanted === `${fqdn ?? ''}:${port ?? ''}`);
  });
  return `${kept.join('\n')}\n`;
}

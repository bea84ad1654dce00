import { createHash } from 'node:crypto';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ControlPlaneEndpoint, EndpointBackend } from '../../ports/machine-provider.ts';
import { parseShowProc, parseShowStat, serverStatesToKeep, type MasterState } from './haproxy-cli.ts';
import { BACKEND, renderHaproxyConfig } from './haproxy-config.ts';
import { LOCAL_HAPROXY_HOST, type HaproxyHost } from './haproxy-host.ts';

/** The longest master socket path HAProxy can bind: `<path>.<pid>.tmp` within 107 bytes, a PID of up to 7 digits. */
export const MASTER_SOCKET_PATH_MAX = 107 - '.4194304.tmp'.length;

export interface HaproxyEndpointOptions {
  /** The endpoint's own folder: its configuration, PID file, master socket, server states and log. */
  dir: string;
  /** host:port the endpoint binds. */
  address: string;
  /** Default Debian's /usr/sbin/haproxy. */
  binary?: string;
  /** How long stop() waits after SIGTERM before SIGKILL. */
  stopGraceMs?: number;
  /** Where HAProxy runs: this host by default, or one reached over SSH. */
  host?: HaproxyHost;
}

/** How long a start or a reload may take before route() gives up on it. */
const READY_MS = 15_000;
const POLL_MS = 50;

/** HAProxy is not installed where the endpoint looks for it. */
export class HaproxyMissingError extends Error {
  override readonly name = 'HaproxyMissingError';
  constructor(readonly binary: string) {
    super(`${binary} not found: the control-plane endpoint runs HAProxy; install it with \`bash scripts/install-test-tools.sh\` or \`apt-get install haproxy\``);
  }
}

/**
 * The control-plane endpoint as one HAProxy in master-worker mode (`-W`), on its host (this one, or
 * one reached over SSH: haproxy-host.ts; `dir` and `binary` are paths there). Every change
 * is a new configuration, checked (`haproxy -c`) before it is put in place, then loaded by starting
 * HAProxy or by a reload (SIGUSR2 to the master: a new worker takes the new connections, the old one
 * keeps its established ones until they end). Writers are serialized by a lock file, so two processes
 * may route at once. The `-C <dir>` argument names the folder on HAProxy's command line, which is how
 * its processes are found again by PID.
 */
export class HaproxyEndpoint implements ControlPlaneEndpoint {
  readonly address: string;
  private readonly dir: string;
  private readonly binary: string;
  private readonly stopGraceMs: number;
  private readonly host: HaproxyHost;

  constructor(options: HaproxyEndpointOptions) {
    this.dir = options.dir;
    this.host = options.host ?? LOCAL_HAPROXY_HOST;
    this.address = options.address;
    this.binary = options.binary ?? '/usr/sbin/haproxy';
    this.stopGraceMs = options.stopGraceMs ?? 5000;
  }

  /**
   * The master socket: in the endpoint's folder, unless that path is too long for HAProxy to bind;
   * then under /tmp, named after the folder, so every process that opens this endpoint finds the same
   * one. HAProxy binds a unix socket at `<path>.<pid>.tmp` and renames it into place, so that name,
   * not the path, must fit a unix socket's 108 bytes of sun_path (NUL included): with a PID of up to 7
   * digits, the path may have at most 95 bytes.
   */
  private masterSocket(): string {
    const inFolder = this.path('master.sock');
    if (Buffer.byteLength(inFolder) <= MASTER_SOCKET_PATH_MAX) return inFolder;
    return `/tmp/fastplane-haproxy-${createHash('sha256').update(this.dir).digest('hex').slice(0, 24)}.sock`;
  }

  private path(name: string): string {
    return join(this.dir, name);
  }

  async route(backends: readonly EndpointBackend[]): Promise<void> {
    const config = renderHaproxyConfig({ bind: this.address, backends, serverStateFile: this.path('server-state') });
    await this.host.mkdir(this.dir);
    await this.host.lock(this.path('endpoint.lock'), async () => {
      const master = await this.runningMaster();
      const previous = await this.host.readText(this.path('haproxy.cfg'));
      if (master !== undefined && previous === config) return this.serving(master, backends, READY_MS);
      const candidate = await this.checked(config);
      if (master === undefined) await this.start(candidate, previous, backends);
      else await this.reload(master, candidate, previous, backends);
    });
  }

  async routes(): Promise<{ machine: string; up: boolean }[] | undefined> {
    const deadline = Date.now() + 2000;
    for (;;) {
      if ((await this.runningMaster()) === undefined) return undefined;
      try {
        return parseShowStat(await this.ask(`@1 show stat ${BACKEND} 4 -1`), BACKEND);
      } catch (error) {
        // The master CLI closes while a reload (another process's route()) re-executes the master.
        if (Date.now() > deadline) throw error;
        await sleep(POLL_MS);
      }
    }
  }

  async stop(): Promise<void> {
    await this.host.mkdir(this.dir);
    await this.host.lock(this.path('endpoint.lock'), async () => {
      const master = await this.runningMaster();
      // The master stops its workers; any left (the master killed) are stopped one by one.
      if (master !== undefined) await this.host.stop(master, this.dir, this.stopGraceMs);
      for (const pid of await this.host.pidsUsing(this.dir)) await this.host.stop(pid, this.dir, this.stopGraceMs);
      if (master !== undefined) await this.gone(master);
      await this.host.remove(this.path('haproxy.pid'));
      await this.host.remove(this.masterSocket());
    });
  }

  /** The master's PID while it runs (its PID file names it, and its command line this folder). */
  private async runningMaster(): Promise<number | undefined> {
    for (let attempt = 0; attempt < 10; attempt++) {
      const text = await this.host.readText(this.path('haproxy.pid'));
      if (text === undefined) return undefined;
      const pid = Number(text.split('\n')[0]);
      // The master writes the file anew when it re-executes for a reload: empty for a moment.
      if (pid > 0) return (await this.ours(pid)) ? pid : undefined;
      await sleep(20);
    }
    return undefined;
  }

  /** Whether pid is HAProxy of this folder. Its command line reads empty for a moment while it forks, so a live process is asked again. */
  private async ours(pid: number): Promise<boolean> {
    for (let attempt = 0; attempt < 10; attempt++) {
      if (await this.host.isOurs(pid, this.dir)) return true;
      if ((await this.host.state(pid)) === 'gone') return false;
      await sleep(10);
    }
    return false;
  }

  /** Writes the configuration beside the one in use and has HAProxy check it; rejects with HAProxy's reasons. */
  private async checked(config: string): Promise<string> {
    const candidate = this.path('haproxy.cfg.next');
    await this.host.writeText(candidate, config, 0o600);
    const check = await this.host.check(this.binary, candidate);
    if (!check.ok) {
      await this.host.remove(candidate);
      if (check.missing) throw new HaproxyMissingError(this.binary);
      throw new Error(`HAProxy refused the endpoint configuration for ${this.address}: ${alerts(check.output)}`);
    }
    return candidate;
  }

  private async start(candidate: string, previous: string | undefined, backends: readonly EndpointBackend[]): Promise<void> {
    const configFile = this.path('haproxy.cfg');
    const logFile = this.path('haproxy.log');
    const logStart = await this.host.size(logFile);
    // A worker whose master was killed may still hold the address, with an older configuration.
    for (const pid of await this.host.pidsUsing(this.dir)) await this.host.stop(pid, this.dir, this.stopGraceMs);
    // Server states saved for a reload are for that process only, not for one started later.
    await this.host.remove(this.path('server-state'));
    await this.host.rename(candidate, configFile);
    // Foreground master (no -D): the PID spawned is the master's, whose SIGUSR2 reloads and SIGTERM stops.
    const args = ['-W', '-C', this.dir, '-f', configFile, '-p', this.path('haproxy.pid'), '-S', `${this.masterSocket()},mode,600`];
    const master = await this.host.spawn(this.binary, args, logFile);
    try {
      await this.serving(master, backends, READY_MS);
    } catch (error) {
      await this.host.stop(master, this.dir, this.stopGraceMs);
      await this.restore(configFile, previous);
      throw new Error(`HAProxy did not start for ${this.address}: ${(error as Error).message}: ${alerts(await this.logSince(logFile, logStart))}`, { cause: error });
    }
  }

  private async reload(master: number, candidate: string, previous: string | undefined, backends: readonly EndpointBackend[]): Promise<void> {
    const configFile = this.path('haproxy.cfg');
    const logFile = this.path('haproxy.log');
    const before = await this.masterState(master);
    // Saved for the new worker, so a server already found down is not routed to again while it is rechecked.
    await this.host.writeText(this.path('server-state'), serverStatesToKeep(await this.ask(`@1 show servers state ${BACKEND}`), backends), 0o600);
    const logStart = await this.host.size(logFile);
    await this.host.rename(candidate, configFile);
    await this.host.signal(master, 'SIGUSR2');
    const deadline = Date.now() + READY_MS;
    let after: MasterState | undefined;
    while (after === undefined || after.reloads <= before.reloads) {
      if (Date.now() > deadline) throw new Error(`HAProxy for ${this.address} did not reload within ${String(READY_MS)} ms`);
      await sleep(POLL_MS);
      after = await this.masterState(master).catch(() => undefined);
    }
    if (after.failed > before.failed) {
      // The master keeps the previous workers on a failed reload: put their configuration back in place.
      await this.restore(configFile, previous);
      throw new Error(`HAProxy could not load the new configuration for ${this.address} and keeps the previous one: ${alerts(await this.logSince(logFile, logStart))}`);
    }
    await this.serving(master, backends, READY_MS);
  }

  /** Resolves once the current worker answers with exactly these servers; rejects if the master exits. */
  private async serving(master: number, backends: readonly EndpointBackend[], timeoutMs: number): Promise<void> {
    const wanted = backends.map(({ machine }) => machine).join(' ');
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      // Alive rather than ours: a process just started may not show its command line yet.
      if ((await this.host.state(master)) === 'gone') throw new Error(`HAProxy (PID ${String(master)}) exited`);
      const servers = await this.ask(`@1 show stat ${BACKEND} 4 -1`).then((answer) => parseShowStat(answer, BACKEND).map(({ machine }) => machine).join(' '), () => undefined);
      if (servers === wanted) return;
      if (Date.now() > deadline) throw new Error(`HAProxy for ${this.address} serves [${servers ?? 'no answer'}], not [${wanted}], after ${String(timeoutMs)} ms`);
      await sleep(POLL_MS);
    }
  }

  private async masterState(master: number): Promise<MasterState> {
    if (!(await this.ours(master))) throw new Error(`HAProxy (PID ${String(master)}) exited`);
    const state = parseShowProc(await this.ask('show proc'));
    if (state === undefined) throw new Error('HAProxy master CLI did not show its master');
    return state;
  }

  /** Resolves once pid is gone; stopProcess may have seen it go early, by a command line read empty while it forked. */
  private async gone(pid: number): Promise<void> {
    const deadline = Date.now() + this.stopGraceMs;
    // A zombie has released its sockets: only its parent's wait is missing.
    while ((await this.host.state(pid)) === 'running') {
      if (Date.now() > deadline) await this.host.signal(pid, 'SIGKILL');
      if (Date.now() > deadline + 5000) throw new Error(`HAProxy (PID ${String(pid)}) survived SIGKILL`);
      await sleep(POLL_MS);
    }
  }

  private ask(command: string): Promise<string> {
    return this.host.ask(this.masterSocket(), command);
  }

  private async restore(configFile: string, previous: string | undefined): Promise<void> {
    if (previous === undefined) await this.host.remove(configFile);
    else await this.host.writeText(configFile, previous, 0o600);
  }

  private async logSince(file: string, offset: number): Promise<string> {
    return ((await this.host.readText(file)) ?? '').slice(offset);
  }
}

/** HAProxy's [ALERT] lines (its reasons for refusing), or its whole output when it has none. */
function alerts(output: string): string {
  const lines = output.split('\n').filter((line) => line.includes('[ALERT]'));
  return (lines.length > 0 ? lines.join('; ') : output).trim();
}

import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Client, ClientChannel, ConnectConfig, ServerHostKeyAlgorithm } from 'ssh2';

// ssh2 (and its crypto) loads with the first connection: commands on local clusters never pay for it.
const requireLazily = createRequire(import.meta.url);

/**
 * One SSH connection per host, shared by every call and opened again after it breaks. Host keys are
 * always checked against the known_hosts file: an unknown or changed key is refused with a message
 * that says which, never accepted.
 */

export interface SshTarget {
  address: string;
  port: number;
  user: string;
}

export interface ExecResult {
  code: number;
  stdout: string;
  stderr: string;
}

export class HostKeyError extends Error {
  override readonly name = 'HostKeyError';
}

export class SshUnreachableError extends Error {
  override readonly name = 'SshUnreachableError';
}

const CONNECT_TIMEOUT_MS = 5_000;
const KEEPALIVE_MS = 2_000;

/** known_hosts lines for a host: `address`, or `[address]:port` when the port is not 22. */
export function knownKeys(knownHosts: string, target: SshTarget): { type: string; key: string }[] {
  const names = target.port === 22 ? [target.address, `[${target.address}]:22`] : [`[${target.address}]:${String(target.port)}`];
  return knownHosts.split('\n').flatMap((line) => {
    const [hosts, type, key] = line.trim().split(/\s+/);
    if (hosts === undefined || type === undefined || key === undefined || hosts.startsWith('#')) return [];
    return hosts.split(',').some((h) => names.includes(h)) ? [{ type, key }] : [];
  });
}

export function targetKey(target: SshTarget): string {
  return `${target.user}@${target.address}:${String(target.port)}`;
}

export class SshConnections {
  private readonly open = new Map<string, Promise<Client>>();

  constructor(private readonly identityFile: string, private readonly knownHostsFile: string) {}

  private connect(target: SshTarget): Promise<Client> {
    const key = targetKey(target);
    const known = this.open.get(key);
    if (known) return known;
    const connecting = new Promise<Client>((resolve, reject) => {
      const { Client: SshClient } = requireLazily('ssh2') as typeof import('ssh2');
      const client = new SshClient();
      const expected = knownKeys(readFileSync(this.knownHostsFile, 'utf8'), target);
      let keyProblem: string | undefined;
      const config: ConnectConfig = {
        host: target.address,
        port: target.port,
        username: target.user,
        privateKey: readFileSync(this.identityFile),
        readyTimeout: CONNECT_TIMEOUT_MS,
        keepaliveInterval: KEEPALIVE_MS,
        keepaliveCountMax: 2,
        hostVerifier: (presented: Buffer) => {
          const base64 = presented.toString('base64');
          if (expected.length === 0) keyProblem = `host key of ${target.address} is unknown: it is not in ${this.knownHostsFile}`;
          else if (!expected.some((entry) => entry.key === base64)) keyProblem = `host key of ${target.address} has CHANGED: it does not match ${this.knownHostsFile}; refusing to connect`;
          return keyProblem === undefined;
        },
      };
      // Ask only for the key types known for this host, so the comparison is with the right key.
      if (expected.length > 0) config.algorithms = { serverHostKey: [...new Set(expected.map((e) => e.type as ServerHostKeyAlgorithm))] };
      let ready = false;
      client.on('ready', () => {
        ready = true;
        resolve(client);
      });
      client.on('error', (error) => {
        this.open.delete(key);
        if (!ready) reject(keyProblem === undefined ? new SshUnreachableError(`ssh ${key}: ${error.message}`) : new HostKeyError(keyProblem));
      });
      client.on('close', () => {
        if (this.open.get(key) === connecting) this.open.delete(key);
        if (!ready) reject(keyProblem === undefined ? new SshUnreachableError(`ssh ${key}: connection closed`) : new HostKeyError(keyProblem));
      });
      client.connect(config);
    });
    this.open.set(key, connecting);
    connecting.catch(() => undefined);
    return connecting;
  }

  /** Runs a shell command on the host; stdin is written and closed first when given. */
  async exec(target: SshTarget, command: string, options: { stdin?: string | Buffer; timeoutMs?: number } = {}): Promise<ExecResult> {
    const client = await this.connect(target);
    const timeoutMs = options.timeoutMs ?? 30_000;
    return new Promise<ExecResult>((resolve, reject) => {
      // Settles exactly once: on the command's end, its deadline, or the connection dying under it
      // (a partition ends it through keepalives, and ssh2 then never calls back or closes the channel).
      let settled = false;
      const finish = (settle: () => void): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        client.off('close', onClose);
        settle();
      };
      const timer = setTimeout(() => {
        finish(() => {
          // A host that stops answering mid-command: the connection is suspect, open a new one next time.
          this.drop(target, client);
          reject(new SshUnreachableError(`ssh ${targetKey(target)}: no answer within ${String(timeoutMs)} ms`));
        });
      }, timeoutMs);
      const onClose = (): void => {
        finish(() => {
          reject(new SshUnreachableError(`ssh ${targetKey(target)}: connection lost`));
        });
      };
      client.once('close', onClose);
      client.exec(command, (error: Error | undefined, channel: ClientChannel) => {
        if (error) {
          finish(() => {
            this.drop(target, client);
            reject(new SshUnreachableError(`ssh ${targetKey(target)}: ${error.message}`));
          });
          return;
        }
        let stdout = '';
        let stderr = '';
        channel.on('data', (data: Buffer) => (stdout += data.toString()));
        channel.stderr.on('data', (data: Buffer) => (stderr += data.toString()));
        channel.on('close', (code: number | null) => {
          finish(() => {
            resolve({ code: code ?? 255, stdout, stderr });
          });
        });
        if (options.stdin !== undefined) channel.end(options.stdin);
        else channel.end();
      });
    });
  }

  /** Copies a local file to the host with SFTP. */
  async upload(target: SshTarget, localPath: string, remotePath: string): Promise<void> {
    const client = await this.connect(target);
    await new Promise<void>((resolve, reject) => {
      const onClose = (): void => {
        reject(new SshUnreachableError(`sftp ${targetKey(target)}: connection lost`));
      };
      client.once('close', onClose);
      client.sftp((error, sftp) => {
        if (error) {
          reject(new SshUnreachableError(`sftp ${targetKey(target)}: ${error.message}`));
          return;
        }
        sftp.fastPut(localPath, remotePath, { mode: 0o700 }, (putError) => {
          client.off('close', onClose);
          sftp.end();
          if (putError) reject(new Error(`copying ${localPath} to ${targetKey(target)}:${remotePath}: ${putError.message}`));
          else resolve();
        });
      });
    });
  }

  /** A stream to a unix socket on the host (OpenSSH's streamlocal forwarding, which sshd allows by default). */
  async openSocket(target: SshTarget, socketPath: string): Promise<ClientChannel> {
    const client = await this.connect(target);
    return new Promise<ClientChannel>((resolve, reject) => {
      client.openssh_forwardOutStreamLocal(socketPath, (error: Error | undefined, channel: ClientChannel) => {
        if (error) reject(new Error(`ssh ${targetKey(target)}: opening ${socketPath}: ${error.message}`));
        else resolve(channel);
      });
    });
  }

  private drop(target: SshTarget, client: Client): void {
    this.open.delete(targetKey(target));
    client.end();
  }

  async close(): Promise<void> {
    const clients = await Promise.allSettled([...this.open.values()]);
    this.open.clear();
    for (const result of clients) if (result.status === 'fulfilled') result.value.end();
  }
}

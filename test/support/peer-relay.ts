import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findEtcdBinary } from '../../src/adapters/etcd/etcd-binaries.ts';
import { stopProcess, withoutEtcdVariables } from '../../src/adapters/host/processes.ts';

/**
 * A relay in front of a member's peer port that can cut one member off from its peers while its
 * clients still reach it: a network partition of the peer traffic only, on loopback, without firewall
 * rules. etcd's peers send raft messages both over connections the receiver dialed (streams) and over
 * connections the sender dialed (pipeline), and every such HTTP request names its sender in
 * X-Server-From (etcd's rafthttp), which is how a relay knows whose traffic a connection carries.
 */
class PeerRelay {
  private readonly server: Server;
  private readonly links = new Set<{ from: string | undefined; sockets: Socket[] }>();

  constructor(
    readonly memberName: string,
    private readonly target: { host: string; port: number },
    private readonly isCut: (from: string | undefined, to: string) => boolean,
  ) {
    this.server = createServer((inbound) => { this.relay(inbound); });
  }

  listen(host: string, port: number): Promise<void> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => { resolve(); });
    });
  }

  /** Drops every connection that a cut now forbids. */
  enforce(): void {
    for (const link of this.links) if (this.isCut(link.from, this.memberName)) this.drop(link);
  }

  close(): Promise<void> {
    for (const link of this.links) this.drop(link);
    return new Promise((resolve) => this.server.close(() => { resolve(); }));
  }

  private drop(link: { from: string | undefined; sockets: Socket[] }): void {
    for (const socket of link.sockets) socket.destroy();
    this.links.delete(link);
  }

  private relay(inbound: Socket): void {
    const link: { from: string | undefined; sockets: Socket[] } = { from: undefined, sockets: [inbound] };
    this.links.add(link);
    let head = Buffer.alloc(0);
    const onHead = (chunk: Buffer): void => {
      head = Buffer.concat([head, chunk]);
      const text = head.toString('latin1');
      if (!text.includes('\r\n\r\n') && head.length < 16_384) return;
      inbound.off('data', onHead);
      link.from = /^x-server-from:\s*(\S+)/im.exec(text)?.[1];
      if (this.isCut(link.from, this.memberName)) {
        this.drop(link);
        return;
      }
      const outbound = createConnection(this.target);
      link.sockets.push(outbound);
      outbound.write(head);
      inbound.pipe(outbound);
      outbound.pipe(inbound);
      outbound.on('error', () => { this.drop(link); });
      outbound.on('close', () => { this.drop(link); });
    };
    inbound.on('data', onHead);
    inbound.on('error', () => { this.drop(link); });
    inbound.on('close', () => { this.drop(link); });
  }
}

export interface RelayedMember {
  name: string;
  clientURL: string;
  pid: number;
}

/**
 * Three or more etcd members (plain http) on `prefix`.0.N, each advertising its peer URL on port 2381,
 * where a relay forwards to its real peer port 2380. `extraFlags` go to the named member's command
 * line. `cutOff(name)` partitions that member from every peer (its clients still reach it);
 * `stop()` kills every member by PID, closes the relays and removes the data dirs.
 */
export class RelayedCluster {
  readonly members: RelayedMember[] = [];
  private readonly relays: PeerRelay[] = [];
  private readonly children: ChildProcess[] = [];
  private readonly dataRoot = mkdtempSync(join(tmpdir(), 'fastplane-relayed-'));
  private readonly idsByName = new Map<string, string>();
  private cut: string | undefined;

  constructor(
    private readonly prefix: string,
    private readonly names: readonly string[],
    private readonly version: string,
    private readonly extraFlags: Record<string, string[]> = {},
  ) {}

  async start(): Promise<void> {
    const address = (i: number): string => `${this.prefix}.0.${String(i + 1)}`;
    const initialCluster = this.names.map((name, i) => `${name}=http://${address(i)}:2381`).join(',');
    for (const [i, name] of this.names.entries()) {
      const relay = new PeerRelay(name, { host: address(i), port: 2380 }, (from, to) => this.isCut(from, to));
      await relay.listen(address(i), 2381);
      this.relays.push(relay);
      const clientURL = `http://${address(i)}:2379`;
      const args = [
        '--name', name,
        '--data-dir', join(this.dataRoot, name),
        '--listen-client-urls', clientURL,
        '--advertise-client-urls', clientURL,
        '--listen-peer-urls', `http://${address(i)}:2380`,
        '--initial-advertise-peer-urls', `http://${address(i)}:2381`,
        '--initial-cluster', initialCluster,
        '--initial-cluster-state', 'new',
        // fastplane's `reconfigurationCheck: fastplane`: its own re-check is the only guard.
        '--strict-reconfig-check=false',
        '--log-level', 'error',
        ...(this.extraFlags[name] ?? []),
      ];
      const child = spawn(findEtcdBinary(this.version), args, { stdio: 'ignore', env: withoutEtcdVariables() });
      this.children.push(child);
      if (child.pid === undefined) throw new Error(`etcd ${name} did not start`);
      this.members.push({ name, clientURL, pid: child.pid });
    }
  }

  /** Tells the relays which member ID is whose (X-Server-From names IDs). */
  learnIds(idsByName: ReadonlyMap<string, string>): void {
    for (const [name, id] of idsByName) this.idsByName.set(name, id);
  }

  /** Partitions `name` from all its peers: no connection from it, none to it. */
  cutOff(name: string): void {
    this.cut = name;
    for (const relay of this.relays) relay.enforce();
  }

  private isCut(from: string | undefined, to: string): boolean {
    if (this.cut === undefined) return false;
    const cutId = this.idsByName.get(this.cut);
    const fromCut = from !== undefined && cutId !== undefined && BigInt(`0x${from}`).toString() === cutId;
    return to === this.cut || fromCut;
  }

  async stop(): Promise<void> {
    for (const member of this.members) await stopProcess(member.pid, this.dataRoot, 2000);
    for (const relay of this.relays) await relay.close();
    rmSync(this.dataRoot, { recursive: true, force: true });
  }
}

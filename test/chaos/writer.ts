import { readFileSync } from 'node:fs';
import type { Etcd3 } from 'etcd3';
import { adminFor, kvClientFor, type ClusterAccess } from '../support/etcd-direct.ts';

export interface WriterReport {
  writesAcked: number;
  writesFailed: number;
  ackedButLost: number;
  longestOutageMs: number;
}

/**
 * A client that writes unique keys every ~20 ms through a scenario and remembers which writes etcd
 * acknowledged. Afterwards every acknowledged key must be readable with its value: a membership change
 * may cost availability for a moment, never an acknowledged write.
 */
export class ContinuousWriter {
  private readonly acked = new Map<string, string>();
  private failed = 0;
  private running = false;
  private loop: Promise<void> = Promise.resolve();
  private lastAck = 0;
  private longestOutage = 0;
  private client: Etcd3;
  private endpoints: string[];
  private sequence = 0;
  private credentials: string;

  constructor(
    private readonly access: ClusterAccess,
    private readonly prefix = '/chaos/',
  ) {
    this.endpoints = [...access.endpoints];
    this.credentials = this.credentialFiles();
    this.client = kvClientFor(access, this.endpoints);
  }

  /** The CA bundle and client certificate as on disk now: a CA rotation changes them under a running client. */
  private credentialFiles(): string {
    const tls = this.access.tls;
    if (!tls) return '';
    return [tls.caFile, tls.certFile, tls.keyFile].map((file) => {
      try {
        return readFileSync(file, 'utf8');
      } catch {
        return '';
      }
    }).join('\n');
  }

  get acknowledged(): number {
    return this.acked.size;
  }

  start(): void {
    this.running = true;
    this.lastAck = Date.now();
    this.loop = this.run();
  }

  private async run(): Promise<void> {
    let lastRefresh = Date.now();
    while (this.running) {
      const key = `${this.prefix}${String(this.sequence).padStart(8, '0')}`;
      const value = `v${String(this.sequence)}-${String(Date.now())}`;
      this.sequence++;
      try {
        await this.client.put(key).value(value);
        const now = Date.now();
        this.longestOutage = Math.max(this.longestOutage, now - this.lastAck);
        this.lastAck = now;
        this.acked.set(key, value);
      } catch {
        this.failed++;
      }
      if (Date.now() - lastRefresh > 1000) {
        lastRefresh = Date.now();
        await this.followMembership();
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    this.longestOutage = Math.max(this.longestOutage, Date.now() - this.lastAck);
  }

  /**
   * Machines come and go in a scenario: keep writing to whichever voters exist now. Like any client
   * that reloads its trust bundle, pick up new credentials too (`certs renew --ca`).
   */
  private async followMembership(): Promise<void> {
    const admin = adminFor(this.access, { callTimeoutMs: 800 });
    try {
      const members = await admin.memberList(this.endpoints);
      const voters = members.filter((m) => !m.isLearner).flatMap((m) => m.clientURLs.slice(0, 1));
      const credentials = this.credentialFiles();
      if (voters.length > 0 && (voters.join() !== this.endpoints.join() || credentials !== this.credentials)) {
        this.credentials = credentials;
        this.endpoints = voters;
        this.client.close();
        this.client = kvClientFor(this.access, voters);
      }
    } catch {
      // No answer this time; keep the current endpoints.
    } finally {
      await admin.close();
    }
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.loop;
  }

  /** Reads every acknowledged key back from the cluster as it is now, through the first voter that answers. */
  async verify(access: ClusterAccess): Promise<WriterReport> {
    this.client.close();
    let stored: Record<string, string> | undefined;
    let lastError: unknown;
    for (const endpoint of access.endpoints) {
      const reader = kvClientFor(access, [endpoint]);
      try {
        stored = await reader.getAll().prefix(this.prefix).strings();
        break;
      } catch (error) {
        lastError = error;
      } finally {
        reader.close();
      }
    }
    if (!stored) throw new Error(`no voter answered the read-back: ${String(lastError)}`);
    let lost = 0;
    for (const [key, value] of this.acked) if (stored[key] !== value) lost++;
    return { writesAcked: this.acked.size, writesFailed: this.failed, ackedButLost: lost, longestOutageMs: this.longestOutage };
  }
}

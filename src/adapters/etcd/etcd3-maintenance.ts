import { once } from 'node:events';
import type { Writable } from 'node:stream';
import { AlarmAction, AlarmType, type Etcd3 } from 'etcd3';
import type { EtcdAlarm } from '../../ports/etcd-admin.ts';
import type { EtcdMaintenance, MemberUsage } from '../../ports/etcd-maintenance.ts';
import { classifyEtcdError, openKvClient, type TlsCredentials } from './etcd3-admin.ts';

export interface Etcd3MaintenanceOptions {
  /** Deadline of quick calls (status, compact, disarm), in ms (default 5000). */
  callTimeoutMs?: number;
  /** Deadline of a snapshot or a defragmentation, in ms (default 10 minutes): both scale with the database. */
  longCallTimeoutMs?: number;
  credentials?: () => TlsCredentials;
}

const ALARM_TYPES: Record<EtcdAlarm['alarm'], AlarmType> = { NOSPACE: AlarmType.Nospace, CORRUPT: AlarmType.Corrupt };

/** EtcdMaintenance over the etcd3 package: one client per endpoint, no retries (like Etcd3Admin). */
export class Etcd3Maintenance implements EtcdMaintenance {
  private readonly clients = new Map<string, Etcd3>();
  private readonly callTimeoutMs: number;
  private readonly longCallTimeoutMs: number;

  constructor(private readonly options: Etcd3MaintenanceOptions = {}) {
    this.callTimeoutMs = options.callTimeoutMs ?? 5000;
    this.longCallTimeoutMs = options.longCallTimeoutMs ?? 600_000;
  }

  private client(endpoint: string): Etcd3 {
    let client = this.clients.get(endpoint);
    if (!client) {
      client = openKvClient([endpoint], { callTimeoutMs: this.callTimeoutMs, credentials: this.options.credentials?.() });
      this.clients.set(endpoint, client);
    }
    return client;
  }

  /** Runs one call, mapping whatever it throws to an EtcdAdminError. */
  private async call<T>(run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (error) {
      throw classifyEtcdError(error);
    }
  }

  /** Tries each endpoint in turn (all these calls are safe to repeat) until one answers. */
  private async anyOf(endpoints: readonly string[], run: (client: Etcd3) => Promise<unknown>): Promise<void> {
    let last: unknown = new Error('no endpoints given');
    for (const endpoint of endpoints) {
      try {
        await run(this.client(endpoint));
        return;
      } catch (error) {
        last = error;
      }
    }
    throw classifyEtcdError(last);
  }

  usage(endpoint: string): Promise<MemberUsage> {
    return this.call(async () => {
      const response = await this.client(endpoint).maintenance.status();
      return {
        clusterId: response.header.cluster_id,
        memberId: response.header.member_id,
        revision: Number(response.header.revision),
        raftIndex: Number(response.raftIndex),
        leaderId: response.leader === '' ? '0' : response.leader,
        isLearner: response.isLearner,
        version: response.version,
        dbSize: Number(response.dbSize),
        dbSizeInUse: Number(response.dbSizeInUse),
      };
    });
  }

  snapshot(endpoint: string, sink: Writable): Promise<void> {
    return this.call(async () => {
      const stream = await this.client(endpoint).maintenance.snapshot({ deadline: Date.now() + this.longCallTimeoutMs });
      await new Promise<void>((resolve, reject) => {
        // Chunks are written in order; the gRPC stream is paused while the file catches up.
        let pending = Promise.resolve();
        let failed = false;
        const fail = (error: unknown): void => {
          failed = true;
          reject(error instanceof Error ? error : new Error(String(error)));
        };
        stream.on('data', (item) => {
          pending = pending.then(async () => {
            if (!failed && !sink.write(item.blob)) await once(sink, 'drain');
          });
          pending.catch(fail);
        });
        stream.on('error', fail);
        stream.on('end', () => {
          void pending.then(() => {
            sink.end(() => {
              resolve();
            });
          }, fail);
        });
      });
    });
  }

  countKeys(endpoint: string, revision: number): Promise<number> {
    return this.call(() => this.client(endpoint).getAll().revision(revision).count());
  }

  async compact(endpoints: readonly string[], revision: number): Promise<void> {
    try {
      await this.anyOf(endpoints, (client) => client.kv.compact({ revision, physical: true }));
    } catch (error) {
      // Another compaction got there first: history up to `revision` is gone, which is what was asked.
      if (!(error instanceof Error && error.message.includes('required revision has been compacted'))) throw error;
    }
  }

  defragment(endpoint: string): Promise<void> {
    return this.call(async () => {
      await this.client(endpoint).maintenance.defragment({ deadline: Date.now() + this.longCallTimeoutMs });
    });
  }

  disarm(endpoints: readonly string[], alarm: EtcdAlarm): Promise<void> {
    return this.anyOf(endpoints, (client) =>
      client.maintenance.alarm({ action: AlarmAction.Deactivate, memberID: alarm.memberId, alarm: ALARM_TYPES[alarm.alarm] }),
    );
  }

  close(): Promise<void> {
    for (const client of this.clients.values()) client.close();
    this.clients.clear();
    return Promise.resolve();
  }
}

import { randomBytes } from 'node:crypto';
import { createConnection, createServer, type AddressInfo } from 'node:net';
import { openKvClient, type KvClientOptions } from '../adapters/etcd/etcd3-admin.ts';
import type { BenchMachine, PreloadSummary } from './result.ts';
import { median, medianSeconds, ratio, seconds } from './stats.ts';

/**
 * 4 KiB values: 100 MB is then ~24k writes, well past the local provider's --snapshot-count of 10,000,
 * so the leader has snapshotted and compacted its log and every learner must be sent a snapshot. With
 * 10 KiB values 100 MB would be ~9.8k writes, replayed from the log instead.
 */
export const VALUE_BYTES = 4 * 1024;
const PRELOAD_CONCURRENCY = 32;

/** Writes `bytes` of values (VALUE_BYTES each, the last one shorter) under /fastplane-bench/preload/; returns the key count. */
export async function preloadKeys(endpoints: string[], bytes: number, credentials: KvClientOptions['credentials']): Promise<number> {
  const kv = openKvClient(endpoints, { callTimeoutMs: 30_000, credentials });
  // Random bytes: the snapshot then costs what real data would (nothing compresses it).
  const value = randomBytes(VALUE_BYTES);
  const keys = Math.ceil(bytes / VALUE_BYTES);
  let next = 0;
  try {
    const writer = async (): Promise<void> => {
      while (next < keys) {
        const i = next++;
        const size = i === keys - 1 ? bytes - i * VALUE_BYTES : VALUE_BYTES;
        await kv.put(`/fastplane-bench/preload/${String(i).padStart(8, '0')}`).value(value.subarray(0, size));
      }
    };
    await Promise.all(Array.from({ length: PRELOAD_CONCURRENCY }, writer));
  } finally {
    kv.close();
  }
  return keys;
}

/** Time to push `bytes` through a TCP connection on 127.0.0.1: what copying a snapshot must cost at least. */
export async function measureLoopbackCopy(bytes: number): Promise<number> {
  const chunk = randomBytes(1024 * 1024);
  let started = 0;
  const server = createServer();
  const done = new Promise<number>((resolve, reject) => {
    server.on('connection', (socket) => {
      let received = 0;
      socket.on('data', (data: Buffer) => {
        received += data.length;
        if (received >= bytes) {
          resolve(performance.now() - started);
          socket.destroy();
        }
      });
      socket.on('error', reject);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address() as AddressInfo;
    const client = createConnection({ host: '127.0.0.1', port });
    await new Promise<void>((resolve, reject) => client.once('connect', resolve).once('error', reject));
    started = performance.now();
    let left = bytes;
    while (left > 0) {
      const piece = left >= chunk.length ? chunk : chunk.subarray(0, left);
      left -= piece.length;
      if (!client.write(piece)) await new Promise((resolve) => client.once('drain', resolve));
    }
    client.end();
    const ms = await done;
    client.destroy();
    return ms;
  } finally {
    server.close();
  }
}

/** The catch-up figures over every joined learner of every run, against a loopback copy of the median snapshot. */
export async function summarizePreload(bytes: number, joined: BenchMachine[]): Promise<PreloadSummary> {
  const snapshots = joined.flatMap((m) => (m.snapshot === null ? [] : [m.snapshot]));
  const snapshotBytes = Math.round(median(snapshots.map((s) => s.bytes).filter((b) => b > 0)) ?? bytes);
  const copySeconds = seconds(await measureLoopbackCopy(snapshotBytes));
  const catchUp = medianSeconds(joined.flatMap((m) => (m.catchUpSeconds === null ? [] : [m.catchUpSeconds]))) ?? null;
  const dataCatchUp = medianSeconds(snapshots.map((s) => s.appliedAfterSeconds)) ?? null;
  const receive = medianSeconds(snapshots.map((s) => s.receiveSeconds)) ?? null;
  const overCopy = (value: number | null): number | null => (value === null ? null : ratio(value, copySeconds));
  return {
    bytes,
    valueBytes: VALUE_BYTES,
    snapshotBytes,
    loopbackCopySeconds: copySeconds,
    catchUpSeconds: catchUp,
    catchUpOverCopy: overCopy(catchUp),
    dataCatchUpSeconds: dataCatchUp,
    dataCatchUpOverCopy: overCopy(dataCatchUp),
    snapshotReceiveSeconds: receive,
    receiveOverCopy: overCopy(receive),
    learnersSentSnapshot: `${String(joined.filter((m) => m.receivedSnapshot === true).length)}/${String(joined.length)}`,
    publishTimeouts: `${String(snapshots.filter((s) => s.publishTimedOut).length)}/${String(snapshots.length)}`,
  };
}

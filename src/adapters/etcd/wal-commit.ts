import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * A member's committed raft index, read offline from its write-ahead log (`member/wal/*.wal`): the
 * last HardState record's `commit`. It is what `--force-new-cluster` keeps (entries past it are
 * discarded), and the same measure as a running member's status `raftIndex`, so members that run and
 * members that are stopped compare directly. Nothing is started: a stopped member must not rejoin.
 *
 * Format (etcd's "persistent storage files"): frames of a little-endian uint64 length (the top byte,
 * when its high bit is set, holds the padding count in its low 3 bits), the walpb.Record bytes, then
 * the padding. A Record is protobuf {1: type, 2: crc, 3: data}; type 3 is a raftpb.HardState
 * {1: term, 2: vote, 3: commit}. Files are preallocated with zeros, so a zero length ends a file.
 */

const WAL_FILE = /^[0-9a-f]{16}-[0-9a-f]{16}\.wal$/;
const STATE_TYPE = 3;

/** Reads a protobuf message's varint fields and the length-delimited ones' bounds. */
function fields(buf: Buffer, start: number, end: number): Map<number, number | Buffer> {
  const out = new Map<number, number | Buffer>();
  let at = start;
  const varint = (): number => {
    let value = 0;
    for (let scale = 1; ; scale *= 128) {
      if (at >= end || scale > 2 ** 63) throw new Error('truncated varint');
      const byte = buf[at++] ?? 0;
      value += (byte & 0x7f) * scale;
      if (byte < 0x80) return value;
    }
  };
  while (at < end) {
    const key = varint();
    const field = Math.floor(key / 8);
    const wire = key % 8;
    if (field === 0) throw new Error('field 0');
    if (wire === 0) out.set(field, varint());
    else if (wire === 2) {
      const length = varint();
      if (at + length > end) throw new Error('truncated field');
      out.set(field, buf.subarray(at, at + length));
      at += length;
    } else throw new Error(`unexpected wire type ${String(wire)}`);
  }
  return out;
}

/** The commit of the last whole HardState in one file, or undefined; a torn tail ends the reading. */
export function lastCommitIn(buf: Buffer): number | undefined {
  let commit: number | undefined;
  let at = 0;
  while (at + 8 <= buf.length) {
    const lenField = buf.readBigUInt64LE(at);
    if (lenField === 0n) break;
    const length = Number(lenField & 0x00ff_ffff_ffff_ffffn);
    const padding = lenField >> 63n === 1n ? Number((lenField >> 56n) & 7n) : 0;
    const end = at + 8 + length;
    if (end + padding > buf.length) break;
    try {
      const record = fields(buf, at + 8, end);
      const data = record.get(3);
      if (record.get(1) === STATE_TYPE && data instanceof Buffer) {
        const state = fields(data, 0, data.length).get(3);
        commit = typeof state === 'number' ? state : (commit ?? 0);
      }
    } catch {
      break;
    }
    at = end + padding;
  }
  return commit;
}

/** The committed index in a member's data dir; undefined when it has no write-ahead log. */
export async function committedIndexOf(dataDir: string): Promise<number | undefined> {
  const walDir = join(dataDir, 'member', 'wal');
  if (!existsSync(walDir)) return undefined;
  const files = (await readdir(walDir)).filter((name) => WAL_FILE.test(name)).sort();
  let commit: number | undefined;
  for (const name of files) commit = lastCommitIn(await readFile(join(walDir, name))) ?? commit;
  return commit;
}

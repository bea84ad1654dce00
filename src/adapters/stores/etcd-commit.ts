import type { ICompare, IKeyValue, IRequestOp } from 'etcd3';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../domain/machine.ts';
import { deriveControlPlane, patchControlPlane, patchMachine } from '../../domain/record-writes.ts';
import { FencedOutError, type LeaseRecord, type StoreWrite } from '../../ports/state-store.ts';
import { decodeControlPlane, decodeLease, decodeMachine } from './record-codec.ts';
import type { EtcdKeys } from './etcd-store-client.ts';

/**
 * How a fenced batch becomes one etcd transaction. The batch is computed from one consistent read of
 * the cluster (its lease, control plane, machines and event counter), exactly as the other stores
 * apply it (src/domain/record-writes.ts, so the same refusals); the transaction then applies it only
 * if the writer's lease key still holds the same value (its token) at the same mod revision, and every
 * record the batch read and rewrites is unchanged since that read. If anything moved (a renewal, a new
 * spec, another write of the same holder), etcd applies nothing and the caller reads again.
 */

export interface Stored<T> {
  kv: IKeyValue;
  record: T;
}

/** One read of everything a batch may touch. */
export interface ClusterRead {
  lease: Stored<LeaseRecord> | undefined;
  controlPlane: Stored<ControlPlaneRecord> | undefined;
  machines: Map<string, Stored<MachineRecord>>;
  eventSeq: IKeyValue | undefined;
}

export function readOps(keys: EtcdKeys, cluster: string): IRequestOp[] {
  const machines = Buffer.from(keys.machines(cluster));
  return [
    { request_range: { key: Buffer.from(keys.lease(cluster)) } },
    { request_range: { key: Buffer.from(keys.controlPlane(cluster)) } },
    { request_range: { key: machines, range_end: prefixEndOf(machines) } },
    { request_range: { key: Buffer.from(keys.eventSeq(cluster)) } },
  ];
}

function prefixEndOf(prefix: Buffer): Buffer {
  // Every prefix here ends with '/', so the range ends where '/' + 1 ('0') begins.
  const end = Buffer.from(prefix);
  end[end.length - 1] = (end[end.length - 1] ?? 0) + 1;
  return end;
}

export function decodeClusterRead(ranges: readonly (readonly IKeyValue[])[]): ClusterRead {
  const [leaseKvs = [], cpKvs = [], machineKvs = [], seqKvs = []] = ranges;
  const one = <T>(kvs: readonly IKeyValue[], decode: (table: string, key: string, text: string) => T, table: string): Stored<T> | undefined => {
    const kv = kvs[0];
    return kv && { kv, record: decode(table, kv.key.toString(), kv.value.toString()) };
  };
  const machines = new Map<string, Stored<MachineRecord>>();
  for (const kv of machineKvs) {
    const record = decodeMachine('machines', kv.key.toString(), kv.value.toString());
    machines.set(record.name, { kv, record });
  }
  return { lease: one(leaseKvs, decodeLease, 'leases'), controlPlane: one(cpKvs, decodeControlPlane, 'control-planes'), machines, eventSeq: seqKvs[0] };
}

/** The writer still holds the lease: same value (its token) at the same revision as read. */
export function leaseCompare(key: string, kv: IKeyValue): ICompare[] {
  return [
    { key: Buffer.from(key), target: 'Value', result: 'Equal', value: kv.value },
    { key: Buffer.from(key), target: 'Mod', result: 'Equal', mod_revision: kv.mod_revision },
  ];
}

/** The key is as read: at the same mod revision, or (0) still absent. */
export function unchanged(key: string, kv: IKeyValue | undefined): ICompare {
  return { key: Buffer.from(key), target: 'Mod', result: 'Equal', mod_revision: kv?.mod_revision ?? '0' };
}

/** The key holds `value`, or (undefined) does not exist: a Value compare on a missing key always fails. */
export function documentIs(key: string, value: string | undefined): ICompare {
  return value === undefined ? { key: Buffer.from(key), target: 'Version', result: 'Equal', version: '0' } : { key: Buffer.from(key), target: 'Value', result: 'Equal', value: Buffer.from(value) };
}

export const put = (key: string, value: unknown, lease?: string): IRequestOp => ({
  request_put: { key: Buffer.from(key), value: Buffer.from(JSON.stringify(value)), ...(lease === undefined ? {} : { lease }) },
});
export const remove = (key: string): IRequestOp => ({ request_delete_range: { key: Buffer.from(key) } });

/**
 * The transaction of one batch, or FencedOutError when the writer's token is not the lease's. Throws
 * StoreRefusedError (before anything is sent) for a write that would break an invariant.
 */
export function batchTxn(keys: EtcdKeys, cluster: string, token: string, read: ClusterRead, writes: readonly StoreWrite[]): { compare: ICompare[]; success: IRequestOp[] } {
  if (read.lease?.record.token !== token) throw new FencedOutError(cluster);
  let cp = read.controlPlane?.record;
  let cpChanged = false;
  const machines = new Map([...read.machines].map(([name, stored]) => [name, stored.record]));
  const touched = new Set<string>();
  const events: EventRecord[] = [];
  for (const write of writes) {
    switch (write.kind) {
      case 'CreateMachine':
        if (!machines.has(write.record.name)) machines.set(write.record.name, write.record);
        touched.add(write.record.name);
        break;
      case 'PatchMachine': {
        const current = machines.get(write.name);
        if (current) machines.set(write.name, patchMachine(current, write.set, write.unset));
        touched.add(write.name);
        break;
      }
      case 'DeleteMachine':
        machines.delete(write.name);
        touched.add(write.name);
        break;
      case 'PatchControlPlane':
        if (cp) cp = patchControlPlane(cp, write.patch);
        cpChanged = true;
        break;
      case 'ReserveOrdinal':
      case 'RecordRemediation':
      case 'AbandonInit':
        if (cp) cp = deriveControlPlane(cp, write);
        cpChanged = true;
        break;
      case 'AppendEvent':
        events.push({ ...write.event, cluster });
        break;
    }
  }

  const compare = leaseCompare(keys.lease(cluster), read.lease.kv);
  const success: IRequestOp[] = [];
  if (cpChanged && cp) {
    compare.push(unchanged(keys.controlPlane(cluster), read.controlPlane?.kv));
    success.push(put(keys.controlPlane(cluster), cp));
  }
  for (const name of touched) {
    const key = keys.machine(cluster, name);
    const before = read.machines.get(name);
    const after = machines.get(name);
    if (after === before?.record) continue;
    compare.push(unchanged(key, before?.kv));
    success.push(after ? put(key, after) : remove(key));
  }
  if (events.length > 0) {
    const seqKey = keys.eventSeq(cluster);
    let seq = read.eventSeq ? Number(read.eventSeq.value.toString()) : 0;
    compare.push(unchanged(seqKey, read.eventSeq));
    for (const event of events) success.push(put(keys.event(cluster, ++seq), event));
    success.push(put(seqKey, seq));
  }
  return { compare, success };
}

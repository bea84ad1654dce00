import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../domain/machine.ts';
import type { LeaseRecord } from '../../ports/state-store.ts';

/**
 * Records as stored text: every durable store keeps them as JSON, so adding an optional field needs no
 * migration. Reading checks the required fields, enough to catch a truncated or foreign value; an error
 * names where the value lives (a table and row, or an etcd key) so it can be found.
 */

/** A stored row that does not hold the record it should; names the table and key so it can be found. */
export class CorruptStateError extends Error {
  override readonly name = 'CorruptStateError';
  constructor(
    readonly table: string,
    readonly key: string,
    detail: string,
  ) {
    super(`state store: row ${key} of table ${table} is corrupt: ${detail}`);
  }
}

type FieldKind = 'string' | 'number' | 'object';

// The required fields checked on read: enough to catch a truncated or foreign row, not a full schema.
const CONTROL_PLANE_FIELDS = {
  name: 'string',
  manifest: 'object',
  createdAt: 'number',
  clusterToken: 'string',
  nextOrdinal: 'number',
} as const satisfies Partial<Record<keyof ControlPlaneRecord, FieldKind>>;

const MACHINE_FIELDS = {
  cluster: 'string',
  name: 'string',
  ordinal: 'number',
  version: 'string',
  templateHash: 'string',
  createdAt: 'number',
  phase: 'string',
  phaseTimes: 'object',
} as const satisfies Partial<Record<keyof MachineRecord, FieldKind>>;

const LEASE_FIELDS = {
  cluster: 'string',
  token: 'string',
  holder: 'string',
  host: 'string',
  pid: 'number',
  ttlMs: 'number',
  acquiredAt: 'number',
  renewedAt: 'number',
} as const satisfies Partial<Record<keyof LeaseRecord, FieldKind>>;

const EVENT_FIELDS = {
  cluster: 'string',
  at: 'number',
  type: 'string',
  reason: 'string',
  message: 'string',
} as const satisfies Partial<Record<keyof EventRecord, FieldKind>>;

/** Parses a row's JSON and checks its required fields; the caller names the record type it holds. */
export function decode(table: string, key: string, text: string, fields: Readonly<Record<string, FieldKind>>): object {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (error) {
    throw new CorruptStateError(table, key, `not JSON (${error instanceof Error ? error.message : String(error)})`);
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new CorruptStateError(table, key, 'not a JSON object');
  }
  const record = value as Record<string, unknown>;
  for (const [field, kind] of Object.entries(fields)) {
    const present = record[field];
    const ok = kind === 'object' ? typeof present === 'object' && present !== null : typeof present === kind;
    if (!ok) throw new CorruptStateError(table, key, `field ${field} is missing or not a ${kind}`);
  }
  return record;
}

/** `table` and `key` say where the value lives (a table and row, or a key space and key), for errors. */
export function decodeControlPlane(table: string, key: string, text: string): ControlPlaneRecord {
  const record = decode(table, key, text, CONTROL_PLANE_FIELDS) as Omit<ControlPlaneRecord, 'generation'> & { generation?: number };
  // Records written before generations existed are generation 1.
  return { ...record, generation: record.generation ?? 1 };
}

export function decodeMachine(table: string, key: string, text: string): MachineRecord {
  return decode(table, key, text, MACHINE_FIELDS) as MachineRecord;
}

export function decodeEvent(table: string, key: string, text: string): EventRecord {
  return decode(table, key, text, EVENT_FIELDS) as EventRecord;
}

export function decodeLease(table: string, key: string, text: string): LeaseRecord {
  return decode(table, key, text, LEASE_FIELDS) as LeaseRecord;
}

import type { V1ConfigMap } from '@kubernetes/client-node';
import type { ControlPlaneRecord, EventRecord, MachineRecord } from '../../domain/machine.ts';
import { CorruptStateError, decodeControlPlane, decodeEvent, decodeMachine } from './record-codec.ts';
import { MANAGED_BY, NAME_ANNOTATION, RECORD_LABEL, type Plain } from './kubernetes-store-client.ts';

/**
 * The records of one control plane as ONE ConfigMap, since the API server changes one object at a
 * time (no transaction spans two): what a fenced batch changes together (the control plane, its
 * machines, its events) is written in one update, under the resourceVersion it was computed from.
 *
 * Keys: `control-plane` (absent until a spec is stored), `machines` and `events` (JSON arrays),
 * `event-seq` (the last event number given) and `fence`, the highest lease fence that wrote here: a
 * writer with a lower one is refused (kubernetes-state-store.ts). Events are the latest MAX_EVENTS
 * only: an object is at most 1 MiB (etcd's request limit the API server keeps to), and the log of
 * every action a cluster ever took would outgrow it.
 */

export const MAX_EVENTS = 500;
export const CLUSTER_RECORD = 'cluster';

export interface ClusterRecords {
  controlPlane: ControlPlaneRecord | undefined;
  machines: Map<string, MachineRecord>;
  events: EventRecord[];
  eventSeq: number;
  fence: number;
}

export const emptyRecords = (): ClusterRecords => ({ controlPlane: undefined, machines: new Map(), events: [], eventSeq: 0, fence: 0 });

function jsonArray(where: string, key: string, text: string | undefined): unknown[] {
  if (text === undefined) return [];
  const value: unknown = JSON.parse(text);
  if (!Array.isArray(value)) throw new CorruptStateError('configmaps', `${where} key ${key}`, 'not a JSON array');
  return value;
}

export function decodeClusterObject(object: V1ConfigMap): ClusterRecords {
  const where = object.metadata?.name ?? 'cluster configmap';
  const data = object.data ?? {};
  const cpText = data['control-plane'];
  const machines = jsonArray(where, 'machines', data.machines).map((item) => decodeMachine('configmaps', `${where} key machines`, JSON.stringify(item)));
  const events = jsonArray(where, 'events', data.events).map((item) => decodeEvent('configmaps', `${where} key events`, JSON.stringify(item)));
  return {
    controlPlane: cpText === undefined ? undefined : decodeControlPlane('configmaps', `${where} key control-plane`, cpText),
    machines: new Map(machines.map((machine) => [machine.name, machine])),
    events,
    eventSeq: Number(data['event-seq'] ?? '0'),
    fence: Number(data.fence ?? '0'),
  };
}

/** The ConfigMap of these records; with the resourceVersion read, the API server applies it only over that version. */
export function encodeClusterObject(cluster: string, name: string, namespace: string, records: ClusterRecords, resourceVersion: string | undefined): Plain<V1ConfigMap> {
  const machines = [...records.machines.values()].sort((a, b) => a.ordinal - b.ordinal || (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return {
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: {
      name,
      namespace,
      labels: { ...MANAGED_BY, [RECORD_LABEL]: CLUSTER_RECORD },
      annotations: { [NAME_ANNOTATION]: cluster },
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
    },
    data: {
      ...(records.controlPlane === undefined ? {} : { 'control-plane': JSON.stringify(records.controlPlane) }),
      machines: JSON.stringify(machines),
      events: JSON.stringify(records.events.slice(-MAX_EVENTS)),
      'event-seq': String(records.eventSeq),
      fence: String(records.fence),
    },
  };
}

/** The generation a spec watch reports changes of: its generation and creation time, or undefined without a control plane. */
export function specVersionOf(object: V1ConfigMap): string | undefined {
  const text = object.data?.['control-plane'];
  if (text === undefined) return undefined;
  try {
    const record = decodeControlPlane('configmaps', object.metadata?.name ?? 'cluster', text);
    return `${String(record.generation)}@${String(record.createdAt)}`;
  } catch {
    // Unreadable: reported once per write; the reader's own error says what is wrong.
    return `unreadable@${object.metadata?.resourceVersion ?? ''}`;
  }
}

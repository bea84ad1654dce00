import { activeCareJob } from '../domain/care-job.ts';
import type { ControlPlaneRecord } from '../domain/machine.ts';
import type { LastMembershipAttempt, Observed, ObservedCare, ObservedEndpoint, ObservedMachine, ObservedMember, StatusReading, VoterReading } from '../planner/types.ts';
import { clientURLOf } from '../planner/view.ts';
import type { CarePort } from '../ports/care.ts';
import type { EtcdAdmin, EtcdAlarm, EtcdMember } from '../ports/etcd-admin.ts';
import type { InfraProvider } from '../ports/machine-provider.ts';
import type { Logger } from '../ports/logger.ts';
import type { StateStore } from '../ports/state-store.ts';

export interface ObserveDeps {
  cluster: string;
  etcd: EtcdAdmin;
  provider: InfraProvider;
  store: StateStore;
  /** Failed reads are logged here at warn, with the endpoint and the error, as well as becoming data. */
  log?: Logger;
  /** The backups folder and the certificates on disk; without it nothing is planned from them. */
  care?: CarePort;
}

/**
 * Backups and certificates as data: a failed read is logged and leaves that part out, never fails the
 * pass; what the records say of backups, maintenance and the rolling job is added to it.
 */
function careOf(deps: ObserveDeps, cp: ControlPlaneRecord, read: PromiseSettledResult<ObservedCare | undefined>): ObservedCare | undefined {
  if (!deps.care) return undefined;
  let care: ObservedCare = {};
  if (read.status === 'fulfilled') care = read.value ?? {};
  else readFailed(deps, 'backups and certificates', [], read.reason);
  if (cp.lastBackupAttempt) care.backups = { count: 0, ...care.backups, lastAttempt: cp.lastBackupAttempt };
  if (cp.lastMaintenance) care.lastMaintenance = cp.lastMaintenance;
  const job = activeCareJob(cp.careJob);
  if (job) care.job = job;
  return care;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** A failed read, logged at warn where it is caught; the caller keeps it as data. */
function readFailed(deps: ObserveDeps, read: string, endpoints: string[], error: unknown): string {
  const text = errorText(error);
  deps.log?.warn({ cluster: deps.cluster, read, endpoints, error: text }, `observe: ${read} failed at ${endpoints.join(', ')}: ${text}`);
  return text;
}

/**
 * How long a pass waits for a learner's status. A learner receiving its snapshot answers nothing until
 * it has applied it, so waiting the adapter's full deadline would hold every pass (the next add, each
 * promotion) for it; a learner that has caught up answers within milliseconds.
 */
export const LEARNER_STATUS_TIMEOUT_MS = 250;

async function readStatus(deps: ObserveDeps, member: EtcdMember): Promise<StatusReading | undefined> {
  const endpoint = member.clientURLs[0];
  if (endpoint === undefined) return undefined;
  try {
    return { ok: true, status: await deps.etcd.status(endpoint, member.isLearner ? { timeoutMs: LEARNER_STATUS_TIMEOUT_MS } : {}) };
  } catch (error) {
    return { ok: false, error: readFailed(deps, 'member status', [endpoint], error) };
  }
}

/**
 * Member list from the machines whose etcd runs, known voters first (learners refuse the call).
 * Linearizable first; without quorum that times out, so fall back to a local read, which is enough to
 * see who is a member and to report the lost quorum.
 */
async function readMembers(deps: ObserveDeps, machines: ObservedMachine[], cp: ControlPlaneRecord): Promise<Observed['members']> {
  const { etcd } = deps;
  const running = machines.filter((m) => m.infra?.memberRunning === true);
  const endpoints = [...running]
    .sort((a, b) => Number(b.record.phase === 'Voter') - Number(a.record.phase === 'Voter'))
    .map(clientURLOf)
    .filter((url): url is string => url !== undefined);
  if (endpoints.length === 0) {
    if (cp.initMachine === undefined) return { ok: true, list: [] };
    return { ok: false, error: 'no member process is running' };
  }
  try {
    return { ok: true, list: await etcd.memberList(endpoints) };
  } catch (linearizableError) {
    const error = readFailed(deps, 'linearizable member list', endpoints, linearizableError);
    try {
      return { ok: true, list: await etcd.memberList(endpoints, { linearizable: false }) };
    } catch (localError) {
      readFailed(deps, 'local member list', endpoints, localError);
      return { ok: false, error };
    }
  }
}

/** The endpoint's routes; a failed read is logged and reads as not running, so the next pass routes again. */
function endpointOf(deps: ObserveDeps, address: string, read: PromiseSettledResult<ObservedEndpoint['routes']>): ObservedEndpoint {
  if (read.status === 'rejected') {
    readFailed(deps, 'endpoint routes', [address], read.reason);
    return { address };
  }
  return read.value === undefined ? { address } : { address, routes: read.value };
}

/**
 * One snapshot of records, provider state and etcd. Failed reads become data, never exceptions. Reads
 * only: status runs it beside a reconcile.
 */
export async function observe(deps: ObserveDeps, lastMembershipAttempt?: LastMembershipAttempt, earlierReadings: readonly VoterReading[] = []): Promise<Observed> {
  const cp = await deps.store.getControlPlane(deps.cluster);
  if (!cp) throw new Error(`control plane ${deps.cluster} has no record`);
  const records = await deps.store.listMachines(deps.cluster);
  const kubernetes = deps.provider.kubernetes !== undefined && cp.manifest.spec.kubernetes !== undefined ? deps.provider.kubernetes : undefined;
  const endpoint = kubernetes === undefined ? undefined : await kubernetes.endpoint(deps.cluster);
  // Each source is read once. The provider's machines, the endpoint's routes and care need nothing of
  // each other, so they are read together, a failed routes or care read kept as data; etcd is read
  // after them, at the machines whose member runs.
  const [machines, [routes, care]] = await Promise.all([
    Promise.all(
      records.map(async (record): Promise<ObservedMachine> => {
        const infra = await deps.provider.describe(deps.cluster, record.name);
        if (!infra) return { record };
        if (kubernetes === undefined || infra.state !== 'Provisioned') return { record, infra };
        return { record, infra: { ...infra, components: await kubernetes.componentHealth(deps.cluster, record.name) } };
      }),
    ),
    Promise.allSettled([endpoint?.routes(), deps.care?.observe()]),
  ]);
  const members = await readMembers(deps, machines, cp);
  let list: ObservedMember[] = [];
  if (members.ok) {
    list = await Promise.all(
      members.list.map(async (member) => {
        const status = await readStatus(deps, member);
        return status ? { ...member, status } : { ...member };
      }),
    );
  }
  const voterEndpoints = list.filter((m) => !m.isLearner && m.status?.ok === true).flatMap((m) => m.clientURLs.slice(0, 1));
  let alarms: EtcdAlarm[] = [];
  if (voterEndpoints.length > 0) {
    try {
      alarms = await deps.etcd.alarms(voterEndpoints);
    } catch (error) {
      // Alarms are advisory for the preflight; a failed read must not hide the rest of the snapshot.
      readFailed(deps, 'alarms', voterEndpoints, error);
      alarms = [];
    }
  }
  const observed: Observed = {
    nextOrdinal: cp.nextOrdinal,
    machines,
    members: members.ok ? { ok: true, list } : members,
    alarms,
  };
  if (cp.initMachine !== undefined) observed.initMachine = cp.initMachine;
  if (cp.initializedAt !== undefined) observed.initializedAt = cp.initializedAt;
  if (cp.lastRemediation) observed.lastRemediation = cp.lastRemediation;
  if (lastMembershipAttempt) observed.lastMembershipAttempt = lastMembershipAttempt;
  const observedCare = careOf(deps, cp, care);
  if (observedCare) observed.care = observedCare;
  if (earlierReadings.length > 0) observed.earlierReadings = [...earlierReadings];
  if (endpoint !== undefined) observed.endpoint = endpointOf(deps, endpoint.address, routes);
  return observed;
}

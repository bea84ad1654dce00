import type { ControlPlane } from '../api/control-plane.ts';
import { InvalidInputError } from '../api/errors.ts';
import { Etcd3Maintenance } from '../adapters/etcd/etcd3-maintenance.ts';
import { Etcd3Admin, readTlsCredentials } from '../adapters/etcd/etcd3-admin.ts';
import { snapshotFileStatus } from '../adapters/etcd/etcd-tools.ts';
import { etcdBinaryFinder } from '../adapters/etcd/etcd-binaries.ts';
import { backupsDir, listBackups, type Backup } from '../backup/backup-files.ts';
import { BackupError, takeBackup } from '../backup/take-backup.ts';
import { BlockedError, checkSnapshot, recordRestore, RestoreMismatchError, verifyRestore } from '../dr/restore.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { systemClock } from '../ports/clock.ts';
import { underLease } from '../lease/under-lease.ts';
import { destroyUnderLease, leaseOptions, parseTimeout, reconcileAndReport, resolveManifest, storedManifest, type RunFlags } from './commands.ts';
import { EXIT } from './exit-codes.ts';
import type { CliContext } from './context.ts';
import { renderTable } from './table.ts';

const LEASE_WAIT_MS = 30_000;

/** `-o` of commands whose result is a record or a list: a table for people, JSON for scripts. */
function tableOrJson(text: string): 'table' | 'json' {
  if (text === 'table' || text === 'json') return text;
  throw new InvalidInputError([`-o: must be table or json, got ${text}`]);
}

export interface DayTwoClients {
  admin: Etcd3Admin;
  maintenance: Etcd3Maintenance;
}

/**
 * Clients of a control plane for one day-2 command (its client certificate unless insecure), closed
 * after `run`. Not the context's cached client: `restore --replace` rebuilds the cluster on the same
 * addresses with a new CA, and a cached connection would keep trusting the old one.
 */
export async function withClients<T>(ctx: CliContext, manifest: ControlPlane, run: (clients: DayTwoClients) => Promise<T>): Promise<T> {
  const tls = ctx.provider(manifest).clientTls(manifest.metadata.name);
  const options = tls === undefined ? {} : { credentials: () => readTlsCredentials(tls) };
  const clients = { admin: new Etcd3Admin(options), maintenance: new Etcd3Maintenance(options) };
  try {
    return await run(clients);
  } finally {
    await Promise.all([clients.admin.close(), clients.maintenance.close()]);
  }
}

/**
 * Runs day-2 work (`certs renew`, `maintain`) holding the cluster's lease, so no reconcile runs at the
 * same time, with its own clients. A holder that keeps the lease, or a safety gate the work hits
 * (BlockedError), is an error line and exit 3; undefined is returned then.
 */
export async function underLeaseWithClients<T>(ctx: CliContext, manifest: ControlPlane, what: string, work: (clients: DayTwoClients, writer: FencedWriter) => Promise<T>): Promise<T | undefined> {
  const name = manifest.metadata.name;
  try {
    const result = await underLease(ctx.store, name, leaseOptions(ctx, name, { waitMs: LEASE_WAIT_MS, force: false }), (writer) => withClients(ctx, manifest, (clients) => work(clients, writer)));
    if (result.done) return result.value;
    process.stderr.write(`error: another fastplane process still reconciles ${name}; ${what} not done\n`);
  } catch (error) {
    if (!(error instanceof BlockedError)) throw error;
    process.stderr.write(`error: ${what} of ${name} stopped: ${error.message}\n`);
  }
  return undefined;
}

/** Client URLs of the control plane's machines on record: where the member list is asked for. */
export async function clientEndpoints(ctx: CliContext, name: string): Promise<string[]> {
  return (await ctx.store.listMachines(name)).flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));
}

export async function backupOf(ctx: CliContext, manifest: ControlPlane): Promise<Backup> {
  const name = manifest.metadata.name;
  const endpoints = await clientEndpoints(ctx, name);
  return withClients(ctx, manifest, ({ admin, maintenance }) =>
    takeBackup({ cluster: name, etcd: admin, maintenance, endpoints, dir: backupsDir(ctx.stateDir, name), inspect: (version, file) => snapshotFileStatus(version, file, etcdBinaryFinder(manifest.spec.etcd.binaries)), now: () => new Date() }),
  );
}

/** A backup that could not be taken is an error line, not a stack: exit 3 when no member could serve it. */
function backupFailed(name: string, error: BackupError): number {
  process.stderr.write(`error: backup of ${name} failed: ${error.message}\n`);
  return error.reason === 'NoHealthyMember' ? EXIT.blocked : EXIT.internal;
}

function describeBackup(backup: Backup): string {
  return `backup of ${backup.cluster}: ${backup.file}\n  revision ${String(backup.revision)}, ${String(backup.totalKeys)} keys, ${String(backup.size)} bytes, from ${backup.member} (etcd ${backup.etcdVersion}), sha256 ${backup.sha256}`;
}

export async function backupCommand(ctx: CliContext, name: string, flags: { output: string }): Promise<number> {
  const format = tableOrJson(flags.output);
  const manifest = await storedManifest(ctx, name);
  let backup: Backup;
  try {
    backup = await backupOf(ctx, manifest);
  } catch (error) {
    if (error instanceof BackupError) return backupFailed(name, error);
    throw error;
  }
  ctx.log.info({ cluster: name, backup }, 'backup taken');
  process.stdout.write(`${format === 'json' ? JSON.stringify(backup, null, 2) : describeBackup(backup)}\n`);
  return EXIT.converged;
}

export async function backupsCommand(ctx: CliContext, name: string, flags: { output: string }): Promise<number> {
  const format = tableOrJson(flags.output);
  const backups = await listBackups(ctx.stateDir, name);
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify(backups, null, 2)}\n`);
  } else if (backups.length === 0) {
    process.stdout.write(`no backups of ${name} in ${backupsDir(ctx.stateDir, name)}\n`);
  } else {
    const rows = backups.map((b) => [b.takenAt, String(b.revision), String(b.totalKeys), String(b.size), b.member, b.etcdVersion, b.file]);
    process.stdout.write(`${renderTable([['TAKEN', 'REVISION', 'KEYS', 'BYTES', 'MEMBER', 'VERSION', 'FILE'], ...rows])}\n`);
  }
  return EXIT.converged;
}

export interface RestoreFlags extends RunFlags {
  from?: string;
  replicas?: string;
  version?: string;
  replace?: boolean;
}

export async function restoreCommand(ctx: CliContext, name: string, flags: RestoreFlags): Promise<number> {
  if (flags.from === undefined) throw new InvalidInputError(['--from: give the snapshot file to restore']);
  parseTimeout(flags.timeout);
  const snapshot = await checkSnapshot(flags.from);
  // The snapshot's own version unless told otherwise: restored by the code that wrote it.
  const version = flags.version ?? snapshot.sidecar?.etcdVersion;
  const manifest = await resolveManifest(ctx, {
    name,
    ...(flags.replicas === undefined ? {} : { replicas: flags.replicas }),
    ...(version === undefined ? {} : { version }),
  });
  try {
    await recordRestore(
      {
        store: ctx.store,
        clock: systemClock,
        identity: ctx.identity,
        backupExisting: async () => backupOf(ctx, await storedManifest(ctx, name)),
        destroyExisting: async () => destroyUnderLease(ctx, await storedManifest(ctx, name), { waitMs: 30_000, force: false }),
        onNote: (text) => process.stderr.write(`${text}\n`),
      },
      manifest,
      snapshot,
      flags.replace === true,
    );
  } catch (error) {
    if (error instanceof BackupError) return backupFailed(name, error);
    if (!(error instanceof BlockedError)) throw error;
    process.stderr.write(`error: ${error.message}\n`);
    return EXIT.blocked;
  }
  process.stderr.write(`restoring ${name} from ${snapshot.source.file} (sha256 ${snapshot.source.sha256})\n`);
  const code = await reconcileAndReport(ctx, manifest, flags);
  if (code !== EXIT.converged) return code;
  // Ends with the proof: the keys read back from the restored cluster against the backup's count.
  const endpoints = await clientEndpoints(ctx, name);
  try {
    const line = await withClients(ctx, manifest, ({ maintenance }) => verifyRestore(snapshot, (revision) => countOnAny(maintenance, endpoints, revision)));
    process.stderr.write(`${line}\n`);
    return EXIT.converged;
  } catch (error) {
    if (!(error instanceof RestoreMismatchError)) throw error;
    process.stderr.write(`error: restore of ${name} failed its check: ${error.message}\n`);
    return EXIT.internal;
  }
}

/** The key count at `revision` from the first member that answers. */
async function countOnAny(maintenance: Etcd3Maintenance, endpoints: readonly string[], revision: number): Promise<number> {
  let last: unknown = new Error('no member on record');
  for (const endpoint of endpoints) {
    try {
      return await maintenance.countKeys(endpoint, revision);
    } catch (error) {
      last = error;
    }
  }
  throw last;
}

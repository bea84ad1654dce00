import { X509Certificate } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import type { ControlPlane } from '../api/control-plane.ts';
import { InvalidInputError } from '../api/errors.ts';
import type { CareJobRecord } from '../domain/care-job.ts';
import type { ControlPlaneRecord, MachineRecord } from '../domain/machine.ts';
import { relaunchFor, startMemberAs } from '../cluster/member-launch.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import type { CarePort, CertificateInfo, DowngradeWork, LeaseGuard, LeaseWriter, MaintainOptions, ObservedCare, SnapshotTools } from '../ports/care.ts';
import type { Clock } from '../ports/clock.ts';
import type { EtcdAdmin } from '../ports/etcd-admin.ts';
import type { EtcdDowngrade } from '../ports/etcd-downgrade.ts';
import type { EtcdMaintenance } from '../ports/etcd-maintenance.ts';
import type { Logger } from '../ports/logger.ts';
import type { KubernetesMachines, MachineProvider } from '../ports/machine-provider.ts';
import type { StateStore } from '../ports/state-store.ts';
import { backupsDir, listBackups, sidecarPath, type Backup } from './backup/backup-files.ts';
import { takeBackup } from './backup/take-backup.ts';
import { advanceJob } from './care-job.ts';
import { renewalStep, renewCertificates, rotateCertificateAuthority, type RenewDeps } from './certificates.ts';
import { changeClusterVersion } from './downgrade.ts';
import type { KubernetesCare } from './kubernetes-restart.ts';
import { maintain, maintenanceStep, type MaintainDeps, type MaintainReport } from './maintain.ts';
import { carryOutRecovery, surveyRecovery, type RecoverDeps, type RecoveryPlan } from './recover.ts';
import type { CheckedSnapshot } from './restore.ts';

/** How `recover` plans: whether a voter on a host that does not answer may be left out. */
export type RecoverOptions = Pick<RecoverDeps, 'acceptUnreachable'>;

/** Settings of the NOSPACE recovery the reconcile loop runs (the same defaults as `fastplane maintain`). */
const NOSPACE_RECOVERY: MaintainOptions = { retainRevisions: 1000, fragmentationThreshold: 0.3 };
/** How long the cluster may take to be healthy again between two members of a rolling restart. */
const HEALTH_TIMEOUT_MS = 60_000;
/** How long a pass's observation waits for a member to report the cluster version. */
const VERSION_READ_MS = 1000;

export interface EtcdClients {
  admin: EtcdAdmin;
  maintenance: EtcdMaintenance;
}

/** What the care of one control plane is built from: ports, and the host's tools as functions. */
export interface CareDeps {
  manifest: ControlPlane;
  /** Backups live in `<stateDir>/backups/<cluster>/`. */
  stateDir: string;
  store: StateStore;
  /** Where the records are, for messages. */
  storeLocation: string;
  provider: MachineProvider;
  /**
   * Runs `use` with clients of the cluster built for it and closed after: a CA rotation changes the
   * trusted CAs and the client certificate, and `restore --replace` the whole cluster, so a client
   * kept from before would trust the wrong CA.
   */
  withClients: <T>(use: (clients: EtcdClients) => Promise<T>) => Promise<T>;
  snapshots: SnapshotTools;
  describeCertificate: (file: string) => Promise<CertificateInfo>;
  /** etcd's downgrade protocol (etcdctl of the members' version), built when a downgrade runs. */
  downgrade: () => Promise<EtcdDowngrade>;
  /** A member's committed index read offline from its data dir, where it lies. */
  committedIndexOffline?: RecoverDeps['committedIndexOffline'];
  clock: Clock;
  log: Logger;
}

/** Expiry by certificate PEM: every pass looks at every certificate, and parsing each one again costs more than reading it. */
const expiries = new Map<string, number>();
const EXPIRIES_KEPT = 512;

function expiryOf(pem: string): number {
  let expiry = expiries.get(pem);
  if (expiry === undefined) {
    expiry = Date.parse(new X509Certificate(pem).validTo);
    if (expiries.size >= EXPIRIES_KEPT) expiries.clear();
    expiries.set(pem, expiry);
  }
  return expiry;
}

/** The certificate that expires first. node:crypto parses PEM without loading the x509 library (status stays fast). */
async function earliestExpiry(files: string[]): Promise<ObservedCare['certificates']> {
  let first: ObservedCare['certificates'];
  for (const file of files) {
    const expiry = expiryOf(await readFile(file, 'utf8'));
    if (first === undefined || expiry < first.earliestExpiry) first = { earliestExpiry: expiry, file };
  }
  return first;
}

/**
 * A Kubernetes control plane's machines for a rolling restart of their components: those with a member
 * and not leaving, in ordinal order, each started at its own recorded Kubernetes version.
 */
function kubernetesCare(cp: ControlPlaneRecord, machines: readonly MachineRecord[], provider: KubernetesMachines | undefined): KubernetesCare | undefined {
  const spec = cp.manifest.spec.kubernetes;
  if (spec === undefined || provider === undefined) return undefined;
  const serving = machines.filter((m) => m.clientURL !== undefined && m.deleteRequested === undefined).sort((a, b) => a.ordinal - b.ordinal);
  return {
    machines: provider,
    names: serving.map((m) => m.name),
    launch: (name) => ({ version: serving.find((m) => m.name === name)?.kubernetesVersion ?? spec.version, ...(spec.binaries === undefined ? {} : { binaries: spec.binaries }) }),
  };
}

/** The key count at `revision` from the first member that answers. */
async function countOnAny(maintenance: EtcdMaintenance, endpoints: readonly string[], revision: number): Promise<number> {
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

/**
 * Day-2 care of one control plane: backups, restore checks, certificates, CA rotation and maintenance,
 * the same code whether a CLI command or the reconcile loop's care actions ask. Work that changes the
 * cluster takes the caller's lease guard and checks it before each step.
 */
export class CareService implements CarePort {
  readonly cluster: string;

  constructor(private readonly deps: CareDeps) {
    this.cluster = deps.manifest.metadata.name;
  }

  /** Reads only: `status` observes through this too, and must stay quick. */
  async observe(): Promise<ObservedCare> {
    const backups = await this.backups();
    const latest = backups.at(-1);
    const care: ObservedCare = { backups: { count: backups.length, ...(latest ? { latestAt: Date.parse(latest.takenAt) } : {}) } };
    if (!this.deps.manifest.spec.provider.insecure) {
      const certificates = await earliestExpiry(await this.deps.provider.certificateFiles(this.cluster));
      if (certificates) care.certificates = certificates;
    }
    const clusterVersion = await this.clusterVersion();
    if (clusterVersion !== undefined) care.clusterVersion = clusterVersion;
    return care;
  }

  /**
   * The cluster version from the first member that answers `/version`; undefined when none does within
   * VERSION_READ_MS (a frozen member must not hold every pass for the client's own timeout).
   */
  private async clusterVersion(): Promise<string | undefined> {
    const endpoints = await this.endpoints();
    if (endpoints.length === 0) return undefined;
    const downgrade = await this.deps.downgrade();
    return Promise.any(endpoints.map(async (endpoint) => (await downgrade.versions(endpoint, VERSION_READ_MS)).cluster)).catch(() => undefined);
  }

  withClients<T>(use: (clients: EtcdClients) => Promise<T>): Promise<T> {
    return this.deps.withClients(use);
  }

  /** Client URLs of the machines on record: where the member list is asked for. */
  async endpoints(): Promise<string[]> {
    return (await this.deps.store.listMachines(this.cluster)).flatMap((m) => (m.clientURL === undefined ? [] : [m.clientURL]));
  }

  get backupsDir(): string {
    return backupsDir(this.deps.stateDir, this.cluster);
  }

  /** Every complete backup, oldest first. */
  backups(): Promise<Backup[]> {
    return listBackups(this.deps.stateDir, this.cluster);
  }

  /** One verified backup from a healthy member; BackupError when none could be taken. */
  async backup(): Promise<Backup> {
    const endpoints = await this.endpoints();
    const { clock } = this.deps;
    return this.deps.withClients(({ admin, maintenance }) =>
      takeBackup({ cluster: this.cluster, etcd: admin, maintenance, endpoints, dir: this.backupsDir, tools: this.deps.snapshots, now: () => new Date(clock.now()) }),
    );
  }

  /** A scheduled backup: one taken, the oldest beyond `keep` pruned; returns a line describing it. */
  async takeBackup(keep: number): Promise<string> {
    const backup = await this.backup();
    const pruned = await this.prune(keep);
    this.deps.log.info({ cluster: this.cluster, backup, pruned }, 'scheduled backup taken');
    return `${backup.file} (revision ${String(backup.revision)})${pruned > 0 ? `, ${String(pruned)} oldest pruned (keep ${String(keep)})` : ''}`;
  }

  /** Removes the oldest complete backups (snapshot and sidecar) beyond `keep`; returns how many went. */
  private async prune(keep: number): Promise<number> {
    const backups = await this.backups();
    const old = backups.slice(0, Math.max(0, backups.length - keep));
    // The sidecar first: a snapshot without one is no longer listed, so a crash in between hides nothing complete.
    for (const backup of old) {
      await rm(sidecarPath(backup.file), { force: true });
      await rm(backup.file, { force: true });
    }
    return old.length;
  }

  /** The proof a restore ends with: the keys read back against the backup's count (RestoreMismatchError). */
  async verifyRestore(snapshot: CheckedSnapshot): Promise<string> {
    // Loaded here: restore.ts checks versions with the manifest schema (zod), which `status` never loads.
    const [{ verifyRestore }, endpoints] = await Promise.all([import('./restore.ts'), this.endpoints()]);
    return this.deps.withClients(({ maintenance }) => verifyRestore(snapshot, (revision) => countOnAny(maintenance, endpoints, revision)));
  }

  /** Every certificate file of the cluster with its subject, issuer and validity. */
  async certificates(): Promise<CertificateInfo[]> {
    return Promise.all((await this.deps.provider.certificateFiles(this.cluster)).map(this.deps.describeCertificate));
  }

  /** New member and client certificates from the cluster's CA; returns the machines renewed. */
  renewCertificates(writer: LeaseWriter, onNote?: (text: string) => void): Promise<string[]> {
    return this.renew(writer, false, onNote);
  }

  /** A new CA, rotated in three rolling restarts; returns the machines given certificates from it. */
  rotateCertificateAuthority(writer: LeaseWriter, onNote?: (text: string) => void): Promise<string[]> {
    return this.renew(writer, true, onNote);
  }

  /** Starts a machine's member again in place, as the control plane's spec says now, recorded first. */
  private restarter(cp: ControlPlaneRecord, writer: LeaseWriter): (machine: MachineRecord) => Promise<void> {
    return (machine) => startMemberAs({ cluster: this.cluster, provider: this.deps.provider, writer }, cp, machine, relaunchFor(cp, machine));
  }

  private async renew(writer: LeaseWriter, rotateCa: boolean, onNote?: (text: string) => void): Promise<string[]> {
    const deps = await this.renewDeps(writer, onNote);
    return rotateCa ? rotateCertificateAuthority(deps) : renewCertificates(deps);
  }

  private async renewDeps(writer: LeaseWriter, onNote?: (text: string) => void): Promise<RenewDeps> {
    const cp = await this.deps.store.getControlPlane(this.cluster);
    if (!cp) throw new InvalidInputError([`no control plane named ${this.cluster} in ${this.deps.storeLocation}`]);
    const machines = await this.deps.store.listMachines(this.cluster);
    const kubernetes = kubernetesCare(cp, machines, this.deps.provider.kubernetes);
    return {
      cluster: this.cluster,
      withAdmin: <T>(use: (admin: EtcdAdmin) => Promise<T>) => this.deps.withClients(({ admin }) => use(admin)),
      provider: this.deps.provider,
      machines,
      ...(kubernetes === undefined ? {} : { kubernetes }),
      start: this.restarter(cp, writer),
      lease: writer,
      clock: this.deps.clock,
      healthTimeoutMs: HEALTH_TIMEOUT_MS,
      onNote: this.noter(onNote),
    };
  }

  async downgrade(writer: LeaseWriter, work: DowngradeWork): Promise<string[]> {
    const cp = await this.deps.store.getControlPlane(this.cluster);
    if (!cp) throw new InvalidInputError([`no control plane named ${this.cluster} in ${this.deps.storeLocation}`]);
    const [machines, downgrade] = await Promise.all([this.deps.store.listMachines(this.cluster), this.deps.downgrade()]);
    const { provider, clock } = this.deps;
    return this.deps.withClients(({ admin }) =>
      changeClusterVersion({ cluster: this.cluster, cp, admin, downgrade, provider, machines, writer, clock, healthTimeoutMs: HEALTH_TIMEOUT_MS, onNote: this.noter() }, work),
    );
  }

  /** The reconcile loop's share of a rolling job: its steps until one waits or the job ends. */
  advanceJob(writer: LeaseWriter, job: CareJobRecord): Promise<CareJobRecord> {
    const { clock } = this.deps;
    if (job.kind === 'RenewCertificates') {
      return this.renewDeps(writer).then((deps) => deps.withAdmin((admin) => advanceJob(renewalStep(deps, admin), job, clock, HEALTH_TIMEOUT_MS)));
    }
    const options = job.kind === 'RecoverNoSpace' ? NOSPACE_RECOVERY : { retainRevisions: job.retainRevisions ?? 0, fragmentationThreshold: job.fragmentationThreshold ?? 0 };
    return this.withMaintainDeps(writer, undefined, (deps) => advanceJob(maintenanceStep(deps, options), job, clock, HEALTH_TIMEOUT_MS));
  }

  /** One round of compaction, defragmentation (leader last) and NOSPACE recovery, with what it did. */
  maintainReport(lease: LeaseGuard, options: MaintainOptions, onNote?: (text: string) => void): Promise<MaintainReport> {
    return this.withMaintainDeps(lease, onNote, (deps) => maintain(deps, options));
  }

  private async withMaintainDeps<T>(lease: LeaseGuard, onNote: ((text: string) => void) | undefined, use: (deps: MaintainDeps) => Promise<T>): Promise<T> {
    const endpoints = await this.endpoints();
    return this.deps.withClients(({ admin, maintenance }) => use({ admin, maintenance, endpoints, lease, clock: this.deps.clock, healthTimeoutMs: HEALTH_TIMEOUT_MS, onNote: this.noter(onNote) }));
  }

  /** Reads only: which members answer, and what recovery would do. Throws HasQuorumError or BlockedError. */
  surveyRecovery(options: RecoverOptions = {}): Promise<RecoveryPlan> {
    return this.deps.withClients((clients) => surveyRecovery(this.recoverDeps(clients, options)));
  }

  /**
   * Under the caller's lease: surveys again (a reconcile that ran meanwhile may have changed the
   * survivors), shows the plan through `onPlan`, and carries it out: the stopped voters restarted, or
   * the chosen survivor forced. The normal reconcile then converges.
   */
  recover(writer: FencedWriter, onPlan: (plan: RecoveryPlan) => void, options: RecoverOptions = {}): Promise<{ plan: RecoveryPlan; done: 'restarted' | 'forced' }> {
    return this.deps.withClients(async (clients) => {
      const deps = this.recoverDeps(clients, options);
      const plan = await surveyRecovery(deps);
      onPlan(plan);
      return { plan, done: await carryOutRecovery(deps, writer, plan) };
    });
  }

  private recoverDeps({ admin, maintenance }: EtcdClients, options: RecoverOptions): RecoverDeps {
    const { store, provider, clock, committedIndexOffline } = this.deps;
    return { cluster: this.cluster, store, provider, admin, maintenance, clock, ...options, ...(committedIndexOffline === undefined ? {} : { committedIndexOffline }) };
  }

  /** Notes go to the log, and to the caller's `onNote` (a command prints them). */
  private noter(onNote?: (text: string) => void): (text: string) => void {
    return (text) => {
      this.deps.log.info({ cluster: this.cluster }, text);
      onNote?.(text);
    };
  }
}

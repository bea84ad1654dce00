import { X509Certificate } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import type { ControlPlane } from '../api/control-plane.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { listBackups, sidecarPath } from '../backup/backup-files.ts';
import type { ObservedCare } from '../planner/types.ts';
import type { CarePort } from '../ports/care.ts';
import type { CliContext } from './context.ts';

/** Settings of the NOSPACE recovery the reconcile loop runs (the same defaults as `fastplane maintain`). */
const NOSPACE_RECOVERY = { retainRevisions: 1000, fragmentationThreshold: 0.3 };

/** The certificate that expires first. node:crypto parses PEM without loading the x509 library (status stays fast). */
async function earliestExpiry(files: string[]): Promise<ObservedCare['certificates']> {
  let first: ObservedCare['certificates'];
  for (const file of files) {
    const expiry = Date.parse(new X509Certificate(await readFile(file)).validTo);
    if (first === undefined || expiry < first.earliestExpiry) first = { earliestExpiry: expiry, file };
  }
  return first;
}

/** Removes the oldest complete backups (snapshot and sidecar) beyond `keep`; returns how many went. */
export async function pruneBackups(stateDir: string, cluster: string, keep: number): Promise<number> {
  const backups = await listBackups(stateDir, cluster);
  const old = backups.slice(0, Math.max(0, backups.length - keep));
  // The sidecar first: a snapshot without one is no longer listed, so a crash in between hides nothing complete.
  for (const backup of old) {
    await rm(sidecarPath(backup.file), { force: true });
    await rm(backup.file, { force: true });
  }
  return old.length;
}

/**
 * The CLI's care of one control plane. The reconcile path's modules (etcd3, x509) load only when an
 * action runs: `status` observes through this too and must stay quick.
 */
export function carePortFor(ctx: CliContext, manifest: ControlPlane): CarePort {
  const name = manifest.metadata.name;
  return {
    async observe() {
      const backups = await listBackups(ctx.stateDir, name);
      const latest = backups.at(-1);
      const care: ObservedCare = { backups: { count: backups.length, ...(latest ? { latestAt: Date.parse(latest.takenAt) } : {}) } };
      if (!manifest.spec.provider.insecure) {
        const certificates = await earliestExpiry(await ctx.provider(manifest).certificateFiles(name));
        if (certificates) care.certificates = certificates;
      }
      return care;
    },
    async takeBackup(keep) {
      const { backupOf } = await import('./backup-commands.ts');
      const backup = await backupOf(ctx, manifest);
      const pruned = await pruneBackups(ctx.stateDir, name, keep);
      ctx.log.info({ cluster: name, backup, pruned }, 'scheduled backup taken');
      return `${backup.file} (revision ${String(backup.revision)})${pruned > 0 ? `, ${String(pruned)} oldest pruned (keep ${String(keep)})` : ''}`;
    },
    async renewCertificates(writer) {
      const { renewUnderLease } = await import('./certs-commands.ts');
      return renewUnderLease(ctx, manifest, writer, { rotateCa: false });
    },
    recoverNoSpace: (writer) => maintainUnderLease(ctx, manifest, writer, NOSPACE_RECOVERY),
    maintain: (writer, options) => maintainUnderLease(ctx, manifest, writer, options),
  };
}

/** One round of `maintain` (dr/maintain.ts) under the caller's lease; returns its reasons. */
async function maintainUnderLease(ctx: CliContext, manifest: ControlPlane, writer: FencedWriter, options: { retainRevisions: number; fragmentationThreshold: number }): Promise<string[]> {
  const name = manifest.metadata.name;
  const [{ maintain }, { clientEndpoints, withClients }, { systemClock }] = await Promise.all([import('../dr/maintain.ts'), import('./backup-commands.ts'), import('../ports/clock.ts')]);
  const endpoints = await clientEndpoints(ctx, name);
  const report = await withClients(ctx, manifest, ({ admin, maintenance }) =>
    maintain({ admin, maintenance, endpoints, writer, clock: systemClock, healthTimeoutMs: 60_000, onNote: (text) => { ctx.log.info({ cluster: name }, text); } }, options),
  );
  return report.reasons;
}

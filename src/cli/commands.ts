import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { defaultControlPlane, validateControlPlane, type ControlPlane } from '../api/control-plane.ts';
import { parseDuration, parseDurationRange } from '../api/duration.ts';
import { InvalidInputError } from '../api/errors.ts';
import { validateVersionChange } from '../api/version-change.ts';
import { specEtcdBinary } from '../adapters/etcd/etcd-binaries.ts';
import type { FencedWriter } from '../lease/fenced-writer.ts';
import { systemClock } from '../ports/clock.ts';
import { convergeGeneration, type Convergence } from '../reconciler/converge.ts';
import { underLease, type UnderLeaseOptions } from '../lease/under-lease.ts';
import type { CliContext } from './context.ts';
import { EXIT } from './exit-codes.ts';
import { loadManifestForCli } from './manifest-file.ts';
import { explain, parseOutput, render } from './render.ts';
import { statusOf } from './status-command.ts';


export const OUTCOME_EXIT: Record<Convergence['outcome'], number> = {
  Converged: EXIT.converged,
  Blocked: EXIT.blocked,
  DeadlineExceeded: EXIT.deadline,
  Superseded: EXIT.superseded,
  Stopped: EXIT.superseded,
  Deleted: EXIT.superseded,
  // Never final: a command whose lease was taken over follows the new holder.
  LeaseLost: EXIT.internal,
};

export interface SpecFlags {
  file?: string;
  name?: string;
  replicas?: string;
  version?: string;
  etcdBinaries?: string;
  strategy?: string;
  provisioningDelay?: string;
  insecure?: boolean;
  reconfigurationCheck?: string;
}

export interface RunFlags {
  timeout: string;
  output: string;
}

export function parseTimeout(text: string): number {
  const ms = parseDuration(text);
  if (ms === undefined || ms <= 0) throw new InvalidInputError([`--timeout: must be a positive duration such as 90s or 10m, got ${text}`]);
  return ms;
}

function parseReplicas(text: string): number {
  if (!/^-?\d+$/.test(text)) throw new InvalidInputError([`--replicas: must be a whole number, got ${text}`]);
  return Number(text);
}

/**
 * The desired state from a file, the stored spec or defaults, with flags applied on top; the result is
 * validated as a whole so every message names the manifest field. A flag that names a different
 * control plane than the file is a contradiction, not an override.
 */
export async function resolveManifest(ctx: CliContext, flags: SpecFlags): Promise<ControlPlane> {
  let base: ControlPlane;
  if (flags.file !== undefined) {
    base = loadManifestForCli(flags.file).manifest;
    if (flags.name !== undefined && flags.name !== base.metadata.name) {
      throw new InvalidInputError([`--name ${flags.name} contradicts metadata.name ${base.metadata.name} in ${flags.file}`]);
    }
  } else {
    if (flags.name === undefined) throw new InvalidInputError(['give -f FILE or --name NAME']);
    base = (await ctx.store.getControlPlane(flags.name))?.manifest ?? defaultControlPlane(flags.name);
  }
  const spec: Record<string, unknown> = { ...base.spec };
  const provider: Record<string, unknown> = { ...base.spec.provider };
  const etcd: Record<string, unknown> = { ...base.spec.etcd };
  if (flags.replicas !== undefined) spec.replicas = parseReplicas(flags.replicas);
  if (flags.version !== undefined) spec.version = flags.version;
  if (flags.strategy !== undefined) spec.scaleUp = { ...base.spec.scaleUp, strategy: flags.strategy };
  if (flags.reconfigurationCheck !== undefined) {
    if (flags.reconfigurationCheck !== 'etcd' && flags.reconfigurationCheck !== 'fastplane') {
      throw new InvalidInputError([`--reconfiguration-check: must be etcd or fastplane, got ${flags.reconfigurationCheck}`]);
    }
    etcd.reconfigurationCheck = flags.reconfigurationCheck;
  }
  if (flags.etcdBinaries !== undefined) etcd.binaries = resolve(flags.etcdBinaries);
  if (flags.provisioningDelay !== undefined) {
    if (parseDurationRange(flags.provisioningDelay) === undefined) {
      throw new InvalidInputError([`--provisioning-delay: must be a duration (8s) or a range (3s-8s), got ${flags.provisioningDelay}`]);
    }
    provider.provisioningDelay = flags.provisioningDelay;
  }
  if (flags.insecure === true) provider.insecure = true;
  const manifest = validateControlPlane({ ...base, spec: { ...spec, etcd, provider } });
  // Members' URLs and certificates are fixed when their machines are created: http and https
  // members cannot form one cluster.
  const stored = (await ctx.store.getControlPlane(manifest.metadata.name))?.manifest;
  if (stored !== undefined && stored.spec.provider.insecure !== manifest.spec.provider.insecure) {
    throw new InvalidInputError([
      `spec.provider.insecure: cannot change on an existing control plane (it is ${String(stored.spec.provider.insecure)}); run fastplane down ${manifest.metadata.name} first`,
    ]);
  }
  const running = (await ctx.store.listMachines(manifest.metadata.name)).map((m) => m.version);
  const versionError = stored && validateVersionChange(stored.spec.version, manifest.spec.version, running);
  if (versionError !== undefined) throw new InvalidInputError([versionError]);
  // A version without a binary (or a binaries dir of another version) fails here, before anything is
  // recorded or started.
  specEtcdBinary(manifest.spec.version, manifest.spec.etcd.binaries);
  return manifest;
}

/** How one reconcile of a spec ended, with wall-clock times for `bench`. */
export interface ReconcileRun extends Convergence {
  /** When the spec was applied (ms since the epoch). */
  startedAt: number;
}

/**
 * Stores the spec (a new generation when it changed) and brings the cluster to it: this process
 * reconciles when it can take the lease, else it follows the holder. The one reconcile path behind
 * up, scale, rollout and bench, so a benchmark measures exactly what users run.
 */
export async function reconcileManifest(ctx: CliContext, manifest: ControlPlane, timeoutMs: number): Promise<ReconcileRun> {
  const name = manifest.metadata.name;
  if (manifest.spec.provider.insecure) {
    process.stderr.write(`warning: control plane ${name} runs without TLS (spec.provider.insecure): anyone who can reach its addresses can read and change etcd; for debugging only\n`);
  }
  const startedAt = Date.now();
  const applied = await ctx.store.applySpec(manifest, startedAt);
  const generation = applied.record.generation;
  ctx.log.info({ cluster: name, generation, changed: applied.changed }, applied.changed ? `stored generation ${String(generation)}` : `spec unchanged at generation ${String(generation)}`);
  // listr2 is loaded by the commands that reconcile, not by every start.
  const { progressFor } = await import('./progress.ts');
  const progress = progressFor();
  const depsFor = await ctx.depsFor(manifest, (event) => {
    progress.onEvent(event);
  });
  const title = `Reconciling control plane ${name} generation ${String(generation)} (${String(manifest.spec.replicas)} replicas, etcd ${manifest.spec.version}, ${manifest.spec.scaleUp.strategy})`;
  const result = await progress.run(title, () =>
    convergeGeneration(manifest, generation, {
      store: ctx.store,
      clock: systemClock,
      deadline: startedAt + timeoutMs,
      leaseTtlMs: ctx.leaseTtlMs,
      identity: ctx.identity,
      depsFor,
      log: ctx.log,
      onPass: (pass) => {
        progress.onPass(pass);
      },
      onEvent: (event) => {
        progress.onEvent(event);
      },
      onNote: (text) => {
        ctx.log.info({ cluster: name }, text);
        progress.note(text);
      },
      // Bad input found while acting (a taken address): leave nothing behind for a new control plane.
      onFailureUnderLease: async (error, writer) => {
        if (error instanceof InvalidInputError && applied.created) await destroyControlPlane(ctx, manifest, writer);
      },
    }),
  );
  return { ...result, startedAt };
}

/** Applies the spec and reconciles until converged, blocked or the deadline; prints the final status. */
export async function reconcileAndReport(ctx: CliContext, manifest: ControlPlane, flags: RunFlags): Promise<number> {
  const format = parseOutput(flags.output);
  const timeoutMs = parseTimeout(flags.timeout);
  const name = manifest.metadata.name;
  const result = await reconcileManifest(ctx, manifest, timeoutMs);
  if (result.outcome === 'Superseded' || result.outcome === 'Stopped' || result.outcome === 'Deleted') {
    process.stderr.write(`${supersededMessage(name, result)}\n`);
    return OUTCOME_EXIT[result.outcome];
  }
  const doc = await statusOf(ctx, name);
  process.stdout.write(`${render(doc, format)}\n`);
  if (result.outcome !== 'Converged') process.stderr.write(`${explain(doc)}\n`);
  return OUTCOME_EXIT[result.outcome];
}

function supersededMessage(name: string, result: Convergence): string {
  if (result.outcome === 'Superseded' && result.newer) {
    const changes = result.newer.changes.length > 0 ? result.newer.changes.join(', ') : 'no spec field';
    return `error: generation ${String(result.generation)} of ${name} was superseded by generation ${String(result.newer.generation)} (${changes}); the cluster now converges to that`;
  }
  if (result.outcome === 'Stopped') return `error: stopped before generation ${String(result.generation)} of ${name} converged: fastplane down asked this process to stop`;
  return `error: control plane ${name} was deleted (fastplane down) before generation ${String(result.generation)} converged`;
}

export async function upCommand(ctx: CliContext, flags: SpecFlags & RunFlags): Promise<number> {
  return reconcileAndReport(ctx, await resolveManifest(ctx, flags), flags);
}

export async function storedManifest(ctx: CliContext, name: string): Promise<ControlPlane> {
  const cp = await ctx.store.getControlPlane(name);
  if (!cp) throw new InvalidInputError([`no control plane named ${name} in ${ctx.storeLocation}; create it with fastplane up`]);
  return cp.manifest;
}

export async function scaleCommand(ctx: CliContext, name: string, flags: RunFlags & { replicas: string }): Promise<number> {
  await storedManifest(ctx, name);
  return reconcileAndReport(ctx, await resolveManifest(ctx, { name, replicas: flags.replicas }), flags);
}

export async function rolloutCommand(ctx: CliContext, name: string, flags: RunFlags & { version: string; etcdBinaries?: string }): Promise<number> {
  await storedManifest(ctx, name);
  return reconcileAndReport(ctx, await resolveManifest(ctx, { name, version: flags.version, ...(flags.etcdBinaries === undefined ? {} : { etcdBinaries: flags.etcdBinaries }) }), flags);
}

/** Stops every member of a control plane by PID and deletes its machines and records, under the lease. */
export async function destroyControlPlane(ctx: CliContext, manifest: ControlPlane, writer: FencedWriter): Promise<void> {
  const name = manifest.metadata.name;
  await writer.verify();
  await ctx.provider(manifest).destroyCluster(name);
  await ctx.store.deleteControlPlane(writer.lease);
}

const DOWN_WAIT_MS = 30_000;

/**
 * Deletes a control plane under its lease, like any writer: a live holder is asked to stop and given
 * `waitMs` to finish its in-flight actions; with `force` it is then fenced out (its next write fails).
 * False when the holder did not stop and `force` was not given.
 */
export async function destroyUnderLease(ctx: CliContext, manifest: ControlPlane, options: { waitMs: number; force: boolean }): Promise<boolean> {
  const result = await underLease(ctx.store, manifest.metadata.name, leaseOptions(ctx, manifest.metadata.name, options), (writer) => destroyControlPlane(ctx, manifest, writer));
  return result.done;
}

/** How a command other than `up` takes a cluster's lease: it asks a running reconcile to stop, and says so. */
export function leaseOptions(ctx: CliContext, name: string, options: { waitMs: number; force: boolean }): UnderLeaseOptions {
  return {
    ...options,
    clock: systemClock,
    ttlMs: ctx.leaseTtlMs,
    identity: ctx.identity,
    onAsked: (holder) => {
      process.stderr.write(`asked ${holder} to stop reconciling ${name}\n`);
    },
  };
}

export async function downCommand(ctx: CliContext, name: string, flags: { force?: boolean; wait?: string } = {}): Promise<number> {
  const manifest = await storedManifest(ctx, name);
  const waitMs = flags.wait === undefined ? DOWN_WAIT_MS : parseTimeout(flags.wait);
  if (!(await destroyUnderLease(ctx, manifest, { waitMs, force: flags.force === true }))) {
    const holder = (await ctx.store.getLease(name))?.holder ?? 'another fastplane process';
    process.stderr.write(`error: ${holder} still reconciles ${name} after ${String(waitMs / 1000)}s; run fastplane down ${name} --force to take over\n`);
    return EXIT.blocked;
  }
  const left = existsSync(join(ctx.stateDir, 'clusters', name));
  process.stdout.write(`control plane ${name} deleted: every member process stopped${left ? '' : ' and every data dir removed'}\n`);
  return EXIT.converged;
}

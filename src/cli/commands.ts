import { existsSync } from 'node:fs';
import { join } from 'node:path';
import {
  defaultControlPlane,
  loadControlPlaneFile,
  validateControlPlane,
  type ControlPlane,
} from '../api/control-plane.ts';
import { parseDuration, parseDurationRange } from '../api/duration.ts';
import { InvalidInputError } from '../api/errors.ts';
import { validateVersionChange } from '../api/version-change.ts';
import { findEtcdBinary } from '../adapters/etcd-binaries.ts';
import { plan } from '../planner/plan.ts';
import { toPlannerSpec } from '../planner/spec.ts';
import { applyControlPlane } from '../reconciler/apply.ts';
import { observe } from '../reconciler/observe.ts';
import { runUntilSettled, type RunOutcome } from '../reconciler/run.ts';
import { buildStatus, recordConditions, type ControlPlaneStatusDocument } from '../reconciler/status.ts';
import type { CliContext } from './context.ts';
import { progressFor } from './progress.ts';
import { explain, render, type OutputFormat } from './render.ts';

export const EXIT = { converged: 0, internal: 1, invalid: 2, blocked: 3, deadline: 4 } as const;

export const OUTCOME_EXIT: Record<RunOutcome, number> = { Converged: EXIT.converged, Blocked: EXIT.blocked, DeadlineExceeded: EXIT.deadline };

export interface SpecFlags {
  file?: string;
  name?: string;
  replicas?: string;
  version?: string;
  strategy?: string;
  provisioningDelay?: string;
  insecure?: boolean;
}

export interface RunFlags {
  timeout: string;
  output: string;
}

export function parseOutput(text: string): OutputFormat {
  if (text === 'table' || text === 'json' || text === 'yaml') return text;
  throw new InvalidInputError([`-o: must be table, json or yaml, got ${text}`]);
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
export function resolveManifest(ctx: CliContext, flags: SpecFlags): ControlPlane {
  let base: ControlPlane;
  if (flags.file !== undefined) {
    base = loadControlPlaneFile(flags.file);
    if (flags.name !== undefined && flags.name !== base.metadata.name) {
      throw new InvalidInputError([`--name ${flags.name} contradicts metadata.name ${base.metadata.name} in ${flags.file}`]);
    }
  } else {
    if (flags.name === undefined) throw new InvalidInputError(['give -f FILE or --name NAME']);
    base = ctx.store.getControlPlane(flags.name)?.manifest ?? defaultControlPlane(flags.name);
  }
  const spec: Record<string, unknown> = { ...base.spec };
  const provider: Record<string, unknown> = { ...base.spec.provider };
  if (flags.replicas !== undefined) spec.replicas = parseReplicas(flags.replicas);
  if (flags.version !== undefined) spec.version = flags.version;
  if (flags.strategy !== undefined) spec.scaleUp = { ...base.spec.scaleUp, strategy: flags.strategy };
  if (flags.provisioningDelay !== undefined) {
    if (parseDurationRange(flags.provisioningDelay) === undefined) {
      throw new InvalidInputError([`--provisioning-delay: must be a duration (8s) or a range (3s-8s), got ${flags.provisioningDelay}`]);
    }
    provider.provisioningDelay = flags.provisioningDelay;
  }
  if (flags.insecure === true) provider.insecure = true;
  const manifest = validateControlPlane({ ...base, spec: { ...spec, provider } });
  // Members' URLs and certificates are fixed when their machines are created: http and https
  // members cannot form one cluster.
  const stored = ctx.store.getControlPlane(manifest.metadata.name)?.manifest;
  if (stored !== undefined && stored.spec.provider.insecure !== manifest.spec.provider.insecure) {
    throw new InvalidInputError([
      `spec.provider.insecure: cannot change on an existing control plane (it is ${String(stored.spec.provider.insecure)}); run fastplane down ${manifest.metadata.name} first`,
    ]);
  }
  const versionError = stored && validateVersionChange(stored.spec.version, manifest.spec.version, ctx.store.listMachines(manifest.metadata.name).map((m) => m.version));
  if (versionError !== undefined) throw new InvalidInputError([versionError]);
  // A version without a binary fails here, before anything is recorded or started.
  findEtcdBinary(manifest.spec.version);
  return manifest;
}

async function statusOf(ctx: CliContext, name: string): Promise<ControlPlaneStatusDocument> {
  const cp = ctx.store.getControlPlane(name);
  if (!cp) throw new InvalidInputError([`no control plane named ${name} in ${ctx.stateDir}`]);
  const deps = ctx.deps(cp.manifest);
  const observed = await observe(deps);
  const now = Date.now();
  const decision = plan(toPlannerSpec(cp.manifest), observed, now);
  const conditions = recordConditions(ctx.store, name, decision.conditions, now);
  return buildStatus(cp, ctx.store.listMachines(name), observed, decision, conditions, ctx.provider(cp.manifest).clientTls(name));
}

/** How one reconcile of a spec ended, with wall-clock times for `bench`. */
export interface ReconcileRun {
  outcome: RunOutcome;
  /** When the spec was applied (ms since the epoch). */
  startedAt: number;
  /** When the last pass observed the result: for Converged, the moment every voter was seen healthy. */
  settledAt: number;
  passes: number;
}

/**
 * Applies the spec and reconciles until converged, blocked or the deadline, with progress on stderr.
 * The one reconcile path behind up, scale, rollout and bench, so a benchmark measures exactly what
 * users run.
 */
export async function reconcileManifest(ctx: CliContext, manifest: ControlPlane, timeoutMs: number): Promise<ReconcileRun> {
  const name = manifest.metadata.name;
  if (manifest.spec.provider.insecure) {
    process.stderr.write(`warning: control plane ${name} runs without TLS (spec.provider.insecure): anyone who can reach its addresses can read and change etcd; for debugging only\n`);
  }
  const isNew = ctx.store.getControlPlane(name) === undefined;
  const startedAt = Date.now();
  applyControlPlane(ctx.store, manifest, startedAt);
  const progress = progressFor();
  const deps = ctx.deps(manifest, (event) => {
    progress.onEvent(event);
  });
  let settledAt = startedAt;
  try {
    const result = await progress.run(`Reconciling control plane ${name} (${String(manifest.spec.replicas)} replicas, etcd ${manifest.spec.version}, ${manifest.spec.scaleUp.strategy})`, () =>
      runUntilSettled(deps, {
        deadline: startedAt + timeoutMs,
        onPass: (pass) => {
          settledAt = pass.now;
          progress.onPass(pass);
        },
      }),
    );
    return { outcome: result.outcome, startedAt, settledAt, passes: result.passes };
  } catch (error) {
    // Bad input found while acting (a taken address): leave nothing behind for a new control plane.
    if (error instanceof InvalidInputError && isNew) await destroyControlPlane(ctx, manifest);
    throw error;
  }
}

/** Applies the spec and reconciles until converged, blocked or the deadline; prints the final status. */
export async function reconcileAndReport(ctx: CliContext, manifest: ControlPlane, flags: RunFlags): Promise<number> {
  const format = parseOutput(flags.output);
  const timeoutMs = parseTimeout(flags.timeout);
  const name = manifest.metadata.name;
  const { outcome } = await reconcileManifest(ctx, manifest, timeoutMs);
  const doc = await statusOf(ctx, name);
  process.stdout.write(`${render(doc, format)}\n`);
  if (outcome !== 'Converged') process.stderr.write(`${explain(doc)}\n`);
  return OUTCOME_EXIT[outcome];
}

export async function upCommand(ctx: CliContext, flags: SpecFlags & RunFlags): Promise<number> {
  return reconcileAndReport(ctx, resolveManifest(ctx, flags), flags);
}

function storedManifest(ctx: CliContext, name: string): ControlPlane {
  const cp = ctx.store.getControlPlane(name);
  if (!cp) throw new InvalidInputError([`no control plane named ${name} in ${ctx.stateDir}; create it with fastplane up`]);
  return cp.manifest;
}

export async function scaleCommand(ctx: CliContext, name: string, flags: RunFlags & { replicas: string }): Promise<number> {
  storedManifest(ctx, name);
  return reconcileAndReport(ctx, resolveManifest(ctx, { name, replicas: flags.replicas }), flags);
}

export async function rolloutCommand(ctx: CliContext, name: string, flags: RunFlags & { version: string }): Promise<number> {
  storedManifest(ctx, name);
  return reconcileAndReport(ctx, resolveManifest(ctx, { name, version: flags.version }), flags);
}

export async function statusCommand(ctx: CliContext, name: string | undefined, flags: { output: string; explain?: boolean }): Promise<number> {
  const format = parseOutput(flags.output);
  if (name !== undefined) {
    const doc = await statusOf(ctx, name);
    process.stdout.write(`${flags.explain === true ? explain(doc) : render(doc, format)}\n`);
    return EXIT.converged;
  }
  const docs: ControlPlaneStatusDocument[] = [];
  for (const cp of ctx.store.listControlPlanes()) docs.push(await statusOf(ctx, cp.name));
  process.stdout.write(`${flags.explain === true ? docs.map(explain).join('\n') : render(docs, format)}\n`);
  return EXIT.converged;
}

/** Stops every member of a control plane by PID and deletes its machines and records. */
export async function destroyControlPlane(ctx: CliContext, manifest: ControlPlane): Promise<void> {
  const name = manifest.metadata.name;
  await ctx.provider(manifest).destroyCluster(name);
  ctx.store.deleteControlPlane(name);
}

export async function downCommand(ctx: CliContext, name: string): Promise<number> {
  await destroyControlPlane(ctx, storedManifest(ctx, name));
  const left = existsSync(join(ctx.stateDir, 'clusters', name));
  process.stdout.write(`control plane ${name} deleted: every member process stopped${left ? '' : ' and every data dir removed'}\n`);
  return EXIT.converged;
}

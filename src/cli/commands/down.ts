import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { storedManifest } from '../../app/records.ts';
import { destroyUnderLease } from '../../app/teardown.ts';
import type { CliContext } from '../context.ts';
import { EXIT } from '../exit-codes.ts';
import { noteOnStderr } from '../render.ts';
import { parseTimeout } from '../spec-flags.ts';

const DOWN_WAIT_MS = 30_000;

/** `down NAME`: every member stopped, machines and records deleted, under the cluster's lease. */
export async function downCommand(ctx: CliContext, name: string, flags: { force?: boolean; wait?: string } = {}): Promise<number> {
  const manifest = await storedManifest(ctx, name);
  const waitMs = flags.wait === undefined ? DOWN_WAIT_MS : parseTimeout(flags.wait);
  if (!(await destroyUnderLease(ctx, manifest, { waitMs, force: flags.force === true }, noteOnStderr))) {
    const holder = (await ctx.store.getLease(name))?.holder ?? 'another fastplane process';
    process.stderr.write(`error: ${holder} still reconciles ${name} after ${String(waitMs / 1000)}s; run fastplane down ${name} --force to take over\n`);
    return EXIT.blocked;
  }
  const left = existsSync(join(ctx.stateDir, 'clusters', name));
  process.stdout.write(`control plane ${name} deleted: every member process stopped${left ? '' : ' and every data dir removed'}\n`);
  return EXIT.converged;
}

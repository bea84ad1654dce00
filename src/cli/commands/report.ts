import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { InvalidInputError } from '../../api/errors.ts';
import { controlPlaneRecord } from '../../app/records.ts';
import { loadBenchResult } from '../../bench/result.ts';
import { loadLatestSweep } from '../../bench/sweep.ts';
import { renderReport } from '../../report/html.ts';
import { EXIT } from '../exit-codes.ts';
import type { CliContext } from '../context.ts';

/** `fastplane report NAME`: writes src/report's HTML for a control plane (and the last bench comparison). */
export async function reportCommand(ctx: CliContext, name: string, flags: { out?: string }): Promise<number> {
  const cp = await controlPlaneRecord(ctx, name);
  let out: string;
  if (flags.out === undefined) {
    out = join(ctx.stateDir, 'reports', `${name}.html`);
    mkdirSync(dirname(out), { recursive: true });
  } else {
    out = resolve(flags.out);
    if (existsSync(out) && statSync(out).isDirectory()) throw new InvalidInputError([`--out: ${flags.out} is a folder; give a file name such as ${name}.html`]);
    if (!existsSync(dirname(out))) throw new InvalidInputError([`--out: folder ${dirname(out)} does not exist`]);
  }
  const html = renderReport({ controlPlane: cp, machines: await ctx.store.listMachines(name), events: await ctx.store.listEvents(name), bench: loadBenchResult(ctx.stateDir), sweep: loadLatestSweep(ctx.stateDir), generatedAt: Date.now() });
  writeFileSync(out, html);
  process.stdout.write(`${out}\n`);
  return EXIT.converged;
}

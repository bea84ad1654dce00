// Draws docs/layers.svg from the layering lint enforces (LAYERS in eslint.config.js), so the picture
// cannot drift from the rule: `npx tsx scripts/draw-layers.ts` rewrites it, and a unit test fails
// while the file differs from what this draws.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { LAYERS } from '../eslint.config.js';

const ROOT = join(import.meta.dirname, '..');
export const LAYERS_SVG = join(ROOT, 'docs', 'layers.svg');

/** What each folder holds, in a few words (docs/architecture.md says it at length). */
const ROLES: Record<string, string> = {
  api: 'manifests, schemas, KCP conversion',
  domain: 'quorum, selection, records (pure)',
  ports: 'EtcdAdmin, MachineProvider, StateStore, CarePort, Clock',
  lease: 'lease keeper, fenced writer',
  planner: 'plan(spec, observed, now) (pure)',
  adapters: 'implement the ports',
  cluster: 'observe, member launches',
  executor: 'one handler per action',
  care: 'backups, restore, recover, certificates, maintenance',
  reconciler: 'one pass, run until settled, status',
  app: 'the use cases, over the Runtime port',
  controller: 'work queue, leader election per cluster',
  sim: 'the model on virtual time',
  bench: 'the benchmark',
  report: 'timeline and HTML report',
  cli: 'one file per verb: parse, call a use case, render',
};
const PURE = new Set(['planner', 'domain']);
const ROOTS = new Set(['cli', 'sim', 'bench']);

/** A folder's floor: one above the highest folder it may import (api, importing nothing, is floor 0). */
function floors(layers: Record<string, readonly string[]>): Map<string, number> {
  const floor = new Map<string, number>();
  const of = (folder: string): number => {
    const known = floor.get(folder);
    if (known !== undefined) return known;
    const below = (layers[folder] ?? []).map(of);
    const value = below.length === 0 ? 0 : Math.max(...below) + 1;
    floor.set(folder, value);
    return value;
  };
  for (const folder of Object.keys(layers)) of(folder);
  return floor;
}

const escape = (text: string): string => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

export function drawLayers(layers: Record<string, readonly string[]> = LAYERS): string {
  const floor = floors(layers);
  const top = Math.max(...floor.values());
  const rows: string[][] = [];
  for (let f = top; f >= 0; f--) rows.push(Object.keys(layers).filter((folder) => floor.get(folder) === f));
  const width = 1100;
  const rowHeight = 58;
  const lines: string[] = [];
  rows.forEach((row, index) => {
    const y = 44 + index * rowHeight;
    const boxWidth = (width - 60 - (row.length - 1) * 12) / row.length;
    row.forEach((folder, at) => {
      const x = 30 + at * (boxWidth + 12);
      const fill = PURE.has(folder) ? '#e6f4ea' : ROOTS.has(folder) ? '#fef3e2' : '#e8f0fe';
      const may = layers[folder] ?? [];
      lines.push(
        `<rect x="${String(x)}" y="${String(y)}" width="${String(boxWidth)}" height="46" rx="6" fill="${fill}" stroke="#5f6368"/>`,
        `<text x="${String(x + boxWidth / 2)}" y="${String(y + 19)}" text-anchor="middle" font-size="13" font-weight="bold">${folder}/ <tspan font-weight="normal">${escape(ROLES[folder] ?? '')}</tspan></text>`,
        `<text x="${String(x + boxWidth / 2)}" y="${String(y + 37)}" text-anchor="middle" font-size="10" fill="#5f6368">${escape(may.length === 0 ? 'imports nothing' : `imports ${may.join(', ')}`)}</text>`,
      );
    });
  });
  const height = 44 + rows.length * rowHeight + 30;
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${String(width)}" height="${String(height)}" viewBox="0 0 ${String(width)} ${String(height)}" font-family="sans-serif">`,
    '<text x="30" y="26" font-size="15" font-weight="bold">src/: each folder imports only the folders it lists, all on lower rows (eslint.config.js, LAYERS)</text>',
    ...lines,
    `<text x="30" y="${String(height - 12)}" font-size="11" fill="#5f6368">Green: pure (no I/O, clock, timer or randomness). Orange: composition roots. Drawn by scripts/draw-layers.ts from LAYERS.</text>`,
    '</svg>',
    '',
  ].join('\n');
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) writeFileSync(LAYERS_SVG, drawLayers());

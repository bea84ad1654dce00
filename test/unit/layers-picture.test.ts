import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { drawLayers, LAYERS_SVG } from '../../scripts/draw-layers.ts';

test('docs/layers.svg is the picture of the layers lint enforces (npx tsx scripts/draw-layers.ts redraws it)', () => {
  assert.equal(readFileSync(LAYERS_SVG, 'utf8'), drawLayers());
});

test('a folder is drawn on a row above every folder it may import', () => {
  const svg = drawLayers({ api: [], ports: ['api'], app: ['ports', 'api'] });
  const rowOf = (folder: string): number => Number(new RegExp(`<rect x="[\\d.]+" y="(\\d+)"[^>]*/>\\n<text[^>]*>${folder}/`).exec(svg)?.[1]);
  assert.ok(rowOf('app') < rowOf('ports') && rowOf('ports') < rowOf('api'), svg);
});

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { finishedCells, inCellOrder, sweepCells, type SweepCell, type SweepCellSummary } from '../../src/bench/sweep.ts';

// A sweep cut short is read back from its folder so `bench --sweep --resume DIR` runs only the cells
// it had not finished: each finished cell must be one the flags make, with its JSON beside the summary.

const root = mkdtempSync(join(tmpdir(), 'fastplane-sweep-resume-'));
after(() => {
  rmSync(root, { recursive: true, force: true });
});

const cells = sweepCells(['100mbit', 'unlimited'], [0, 67108864], ['5s']);

function finished(cell: SweepCell, file: string): SweepCellSummary {
  return { ...cell, file, startedAt: '2026-12-08T00:00:00.000Z', loadAverages: [], seconds: {}, learnersOverSerial: null, learnersOverOneAtATime: null, learnersJoinPhaseOverOneAtATime: null, modelErrors: 0 };
}

function sweepDir(name: string, done: SweepCellSummary[], files = done.map((d) => d.file)): string {
  const dir = join(root, name);
  mkdirSync(dir);
  for (const file of files) writeFileSync(join(dir, file), '{}\n');
  writeFileSync(join(dir, 'summary.json'), JSON.stringify({ kind: 'fastplane-bench-sweep', startedAt: '2026-12-08T00:00:00.000Z', finishedAt: '2026-12-08T01:00:00.000Z', cells: done }));
  return dir;
}

test('the cells a sweep finished are kept, in the sweep\'s order, with its start time', () => {
  const [a, b, c] = cells;
  assert.ok(a && b && c);
  const done = [finished(c, 'cell-3.json'), finished(a, 'cell-1.json')];
  const read = finishedCells(sweepDir('two-done', done), cells);
  assert.ok('done' in read, JSON.stringify(read));
  assert.equal(read.startedAt, '2026-12-08T00:00:00.000Z');
  assert.deepEqual(inCellOrder(cells, read.done).map((d) => d.file), ['cell-1.json', 'cell-3.json']);
  assert.deepEqual(inCellOrder([b], read.done), [], 'the second cell is still to run');
});

test('a folder that cannot be resumed with these flags is refused, saying why', () => {
  const [a] = cells;
  assert.ok(a);
  const problems = (dir: string): string[] => {
    const read = finishedCells(dir, cells);
    return 'problems' in read ? read.problems : [];
  };
  assert.match(problems(join(root, 'nowhere'))[0] ?? '', /holds no sweep summary/);
  const other = finished({ hostBandwidth: '1gbit', keyspaceBytes: 0, provisioningDelay: '30s' }, 'cell-9.json');
  assert.match(problems(sweepDir('other-flags', [other]))[0] ?? '', /has the cell 1gbit, keyspace 0 bytes, provisioning 30s, which these flags do not make/);
  assert.match(problems(sweepDir('json-gone', [finished(a, 'cell-1.json')], []))[0] ?? '', /has no cell-1\.json/);
  const bad = join(root, 'not-json');
  mkdirSync(bad);
  writeFileSync(join(bad, 'summary.json'), '{');
  assert.match(problems(bad)[0] ?? '', /is not JSON/);
});

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ROWS } from '../support/matrix-run.ts';
import { missingPairs } from '../support/matrix-scenario.ts';

test('the combination matrix\'s rows cover every pair of values of every two factors', () => {
  assert.equal(new Set(ROWS.map((row) => JSON.stringify(row))).size, ROWS.length, 'no row twice');
  // The lifecycle scenario covers every pair on its own; the other scenarios' rows are extra.
  assert.deepEqual(missingPairs(ROWS.filter((row) => row.scenario === 'lifecycle')), []);
  assert.ok(ROWS.some((row) => row.provider === 'local') && ROWS.some((row) => row.provider === 'ssh'), 'both files have rows');
});

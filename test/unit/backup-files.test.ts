import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backupFileName } from '../../src/care/backup/backup-files.ts';

test('backup file names are to the millisecond: two backups in one second at one revision never share a file, and names sort by time', () => {
  const first = backupFileName(new Date('2026-12-05T11:18:18.120Z'), 0);
  const second = backupFileName(new Date('2026-12-05T11:18:18.870Z'), 0);
  const later = backupFileName(new Date('2026-12-05T11:18:19.001Z'), 0);
  assert.equal(first, '20261205T111818.120Z-rev0.db');
  assert.notEqual(first, second);
  assert.deepEqual([later, second, first].sort(), [first, second, later]);
});

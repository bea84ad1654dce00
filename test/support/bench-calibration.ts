import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Calibration } from '../../src/bench/calibration.ts';

/**
 * A calibration for the bench's FASTPLANE_BENCH_CALIBRATION hook, every init and join costing the
 * given seconds and no keyspace, written into `dir`; returns the file.
 */
export function writeFlatCalibration(dir: string, initSeconds: number, joinSeconds: number): string {
  const calibration: Calibration = {
    version: '3.6.17',
    addRule: 'quorum-of-resulting',
    initSamplesSeconds: Array<number>(5).fill(initSeconds),
    joinSamplesSeconds: Array<number>(5).fill(joinSeconds),
    catchUpSamplesSeconds: [],
    restoreSamplesSeconds: [],
    coldSeconds: { init: initSeconds, join: joinSeconds, catchUp: null, restore: null },
    initSeconds,
    joinSeconds,
    keyspaceBytes: null,
    catchUpSeconds: null,
    restoreSeconds: null,
    leaderOutbound: null,
  };
  const file = join(dir, 'calibration.json');
  writeFileSync(file, JSON.stringify(calibration));
  return file;
}

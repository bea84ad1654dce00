import { after, before, describe, test } from 'node:test';
import { cliEnvFactory } from '../support/cli.ts';
import { kvClientFor } from '../support/etcd-direct.ts';
import { resultsTable, ROWS, runRow, type MatrixSite } from '../support/matrix-run.ts';
import { startSingleEtcd, type SingleEtcd } from '../support/single-etcd.ts';

// The combination matrix's rows on the local provider (test/support/matrix-run.ts says what each
// row does), one after another, with one etcd as the record store of the etcd-store rows.
let store: SingleEtcd | undefined;

// Registered before the env factory's clean-up (hooks run in order): the store etcd goes first, by
// PID; then the env kills what is left under its dir.
after(async () => {
  site.store?.kv.close();
  await store?.stop();
  console.log(resultsTable(site.results));
});
const site: MatrixSite = { env: cliEnvFactory()('127.190'), results: [] };

describe('the combination matrix, local provider: one scenario per row', () => {
  before(async () => {
    store = await startSingleEtcd('127.190.250.1');
    site.store = { endpoint: store.endpoint, kv: kvClientFor({ endpoints: [store.endpoint] }) };
  });
  ROWS.forEach((row, index) => {
    if (row.provider !== 'local') return;
    test(`mx${String(index + 1)}: ${row.scenario}, ${row.provider}, ${row.store} store, ${row.check} check, ${row.driver}`, { timeout: 300_000 }, () => runRow(site, index, row));
  });
});

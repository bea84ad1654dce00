import { after, before, describe, test } from 'node:test';
import { cliEnvFactory } from '../support/cli.ts';
import { kvClientFor } from '../support/etcd-direct.ts';
import { resultsTable, ROWS, runRow, type MatrixSite } from '../support/matrix-run.ts';
import { NetLab } from '../support/netlab.ts';
import { startSingleEtcd, type SingleEtcd } from '../support/single-etcd.ts';

// The combination matrix's etcd rows on the ssh provider (test/support/matrix-run.ts says what each row
// does; the Kubernetes row has its own file and lab), one after another on one network lab of 7 hosts (5 members and a rollout's surge machine,
// with one to spare), with one etcd as the record store of the etcd-store rows.
const lab = new NetLab(65);
let store: SingleEtcd | undefined;

// Registered before the env factory's clean-up (hooks run in order): the lab's namespaces (and every
// process in them) and the store etcd go first, by PID; then the env kills what is left under its dir.
after(async () => {
  site.store?.kv.close();
  lab.down();
  await store?.stop();
  console.log(resultsTable(site.results));
});
const site: MatrixSite = { env: cliEnvFactory()('127.191'), results: [] };

describe('the combination matrix, ssh provider: one scenario per row', () => {
  before(async () => {
    site.lab = lab.up(7);
    store = await startSingleEtcd('127.191.250.1');
    site.store = { endpoint: store.endpoint, kv: kvClientFor({ endpoints: [store.endpoint] }) };
  });
  ROWS.forEach((row, index) => {
    if (row.provider !== 'ssh' || row.scenario === 'kubernetes') return;
    test(`mx${String(index + 1)}: ${row.scenario}, ${row.provider}, ${row.store} store, ${row.check} check, ${row.driver}`, { timeout: 300_000 }, () => runRow(site, index, row));
  });
});
